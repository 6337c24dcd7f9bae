// Package feedback owns `mneme eval feedback`: a deterministic simulation
// of why review is not retrieval. A fixed set of information needs recurs
// over many sessions; each need has memories that answer it and lookalikes
// that only share its words. Every retrieval goes through mneme.search, and
// three policies update FSRS state afterwards: none, auto-GOOD (reinforce
// everything retrieved) and review (the pipeline's offline reviewer rates
// what the conversation used). Precision@5 over the sessions shows which
// policy learns and which entrenches its mistakes.
package feedback

import (
	"fmt"
	"strings"
)

// need is one recurring information need.
type need struct {
	Query      string
	Relevant   []string // memories that answer it
	Later      []string // answers that arrive half-way through
	Lookalikes []string // memories that share its words but do not answer it
	Period     int      // it recurs every Period sessions
	Offset     int
}

// topics: the query of each need, then the words of the memories that
// answer it and of the ones that merely mention it.
var topics = []struct {
	query    string
	answers  string
	mentions string
}{
	{"garden tomatoes", "seedlings compost trellis blight watering mulch basil pruning cages fertiliser", "ketchup pizza sauce salad supermarket price recipe soup lasagne market"},
	{"bike repair", "chain derailleur spokes brake pads tyre puncture cassette wheel truing", "movie scene neighbour shop closed rental tourist parade sunday"},
	{"sister wedding", "venue vows dress caterer guest list rings bouquet photographer speech", "cousin gossip invitation envelope television series magazine song playlist"},
	{"python script", "pandas dataframe csv parser argparse virtualenv pytest regex logging", "snake zoo documentary comedy troupe monty sketch museum reptile"},
	{"tax return", "deduction receipts accountant deadline refund invoices pension allowance form", "tennis serve return flight ticket airline luggage delay gate"},
	{"piano lessons", "scales chopin sight reading metronome teacher pedal etude recital", "furniture movers stairs apartment heavy truck lift insurance"},
	{"kitchen renovation", "cabinets countertop plumber tiles backsplash sink contractor permit oven", "cooking show chef restaurant review dinner candle date wine"},
	{"marathon training", "intervals tempo long run shoes hydration taper splits pace", "television coverage broadcast commentator crowd traffic closure street"},
	{"visa application", "embassy appointment passport photos biometrics sponsor letter stamp", "credit card bank fraud statement payment cashback points"},
	{"dog vet", "vaccination rabies checkup worming collar microchip kennel diet", "cat video internet meme cartoon neighbour barking noise"},
	{"camera lens", "aperture focal length prime zoom autofocus bokeh filter mount", "eye doctor glasses contact optician prescription frame blurry"},
	{"book club", "novel chapter discussion author reading list hardcover annotations host", "golf club membership course handicap caddie tournament"},
}

// buildWorkload makes the needs: five answering memories and five
// lookalikes each, words drawn in a fixed order (no randomness).
func buildWorkload() ([]need, []string) {
	needs := make([]need, len(topics))
	for i, t := range topics {
		ans, men := strings.Fields(t.answers), strings.Fields(t.mentions)
		n := need{Query: t.query, Period: 2 + i%3, Offset: i % (2 + i%3)}
		for j := range 5 {
			// Answers: two short notes, three longer ones (BM25 ranks them
			// lower). Lookalikes: three repeat the query words (BM25 ranks
			// them high), two mention it once. Retrieval starts out mixed.
			a1, a2 := ans[(2*j)%len(ans)], ans[(2*j+1)%len(ans)]
			m1, m2 := men[(2*j)%len(men)], men[(2*j+1)%len(men)]
			if j < 2 {
				n.Relevant = append(n.Relevant, fmt.Sprintf("Notes on the %s: %s and %s.", t.query, a1, a2))
			} else {
				n.Relevant = append(n.Relevant, fmt.Sprintf("Notes on the %s: %s and %s, what we decided, what to check first and what to try next time.", t.query, a1, a2))
			}
			if j < 3 {
				n.Lookalikes = append(n.Lookalikes, fmt.Sprintf("The %s again: %s, %s and %s.", t.query, t.query, m1, m2))
			} else {
				n.Lookalikes = append(n.Lookalikes, fmt.Sprintf("Mentioned the %s while talking about %s and %s.", t.query, m1, m2))
			}
		}
		for j := range 5 {
			n.Later = append(n.Later, fmt.Sprintf("Update on the %s: %s and %s.", t.query, ans[j], ans[(j+5)%len(ans)]))
		}
		needs[i] = n
	}
	// Hubs: digests that name several needs at once, retrieved for each.
	var hubs []string
	for h := 0; h < len(topics); h += 3 {
		var qs []string
		for _, t := range topics[h:min(h+3, len(topics))] {
			qs = append(qs, t.query)
		}
		hubs = append(hubs, "Digest: "+strings.Join(qs, ", ")+".")
	}
	return needs, hubs
}

// due reports whether need n comes up in session s (0-based).
func (n need) due(s int) bool { return s%n.Period == n.Offset }
