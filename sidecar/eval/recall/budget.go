package recall

import (
	"strings"
)

// Doc is one retrieved item (a memory, a raw turn, a window of turns) as
// the budget sees it: its length in words and where each source turn ends
// inside its text.
type Doc struct {
	Words int
	Turns []DocTurn
}

// DocTurn places one source turn inside a Doc's text. End is the number of
// words of the doc's text up to and including the turn's last word; a turn
// whose text could not be located has End = Words (it counts only when the
// whole doc fits).
type DocTurn struct {
	ID  string
	End int
}

// Words counts words the way the budget does: whitespace-separated fields.
func Words(s string) int { return len(strings.Fields(s)) }

// Take fills a context of budget words with docs in rank order. The context
// is the docs' texts concatenated and cut at exactly budget words: a doc
// that fits is taken whole; the first one that does not fit is cut, and of
// it only the turns that end inside the cut count; nothing after it is
// taken. The same rule holds for every method, so a method gains nothing
// from large items except what fits. It returns the ids of the turns
// inside the context, in the order the context holds them, and the words
// used (at most budget).
func Take(docs []Doc, budget int) (inside []string, words int) {
	seen := map[string]bool{}
	for _, d := range docs {
		if words >= budget {
			break
		}
		room := budget - words
		for _, t := range d.Turns {
			if t.End <= room && !seen[t.ID] {
				seen[t.ID] = true
				inside = append(inside, t.ID)
			}
		}
		if d.Words > room {
			return inside, budget
		}
		words += d.Words
	}
	return inside, words
}

// evidenceRecall is the share of evidence ids inside a context; ids that
// name no turn are never inside, so they count as missed.
func evidenceRecall(evidence, inside []string) (recall float64, hits int) {
	if len(evidence) == 0 {
		return 0, 0
	}
	in := make(map[string]bool, len(inside))
	for _, id := range inside {
		in[id] = true
	}
	for _, e := range evidence {
		if in[e] {
			hits++
		}
	}
	return float64(hits) / float64(len(evidence)), hits
}

// PlaceTurns builds a Doc for text that contains the given turns' texts in
// order (possibly with other words around them, e.g. speaker names, a
// summary): each turn's End is found by locating its text after the
// previous one. Turns that cannot be located end at the doc's end.
func PlaceTurns(text string, ids []string, texts []string) Doc {
	d := Doc{Words: Words(text)}
	pos := 0
	for i, id := range ids {
		end := d.Words
		if j := strings.Index(text[pos:], texts[i]); j >= 0 && texts[i] != "" {
			stop := pos + j + len(texts[i])
			end = Words(text[:stop])
			pos = stop
		}
		d.Turns = append(d.Turns, DocTurn{ID: id, End: end})
	}
	return d
}
