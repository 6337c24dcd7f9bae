package pipeline

import (
	"context"
	"fmt"
	"math"
	"strings"
)

// The offline segmenter, deterministic for a given embedder:
//   - boundary: embed each message's content words; a topic shift before
//     message i is a cosine similarity under segment_shift_similarity between
//     the centroid of the segment_window messages before i (within the open
//     episode) and of the ones from i on. Episodes have at least
//     segment_episode_min messages; one reaching segment_episode_max is cut
//     at its weakest boundary. A check job leaves the last, open episode
//     queued (it may continue) and needs a full window after a boundary; a
//     forced cut stores everything, a too-short tail joining the episode
//     before it.
//   - summary: none here; the segment job asks SQL for the extractive one
//     (mneme.extractive_summary: the most informative sentences by the
//     search's own term weights).
//   - surprise: 1 - the highest cosine similarity to the conversation's 50
//     most recent memories (1 for the first memory).
//   - label: none here; SQL's offline labeller (mneme.auto_label) assigns
//     it from the messages in mneme.create_episode. Never pinned.

// heuristicPrior is how many recent memories the offline segmenter compares
// an episode with for surprise.
const heuristicPrior = 50

// heuristicSegmenter is the offline Segmenter.
type heuristicSegmenter struct {
	embed embedder
}

func (h heuristicSegmenter) Segment(ctx context.Context, in segmentInput) ([]episode, error) {
	msgs, s := in.Messages, in.Settings
	texts := make([]string, len(msgs))
	for i, m := range msgs {
		texts[i] = topicText(m.Content)
	}
	embs, err := h.embed.Embed(ctx, texts)
	if err != nil {
		return nil, fmt.Errorf("embed %d messages: %w", len(msgs), err)
	}
	if len(embs) != len(msgs) {
		return nil, fmt.Errorf("embedder returned %d vectors for %d messages", len(embs), len(msgs))
	}
	spans := cutEpisodes(embs, in.Forced, s)
	if len(spans) == 0 {
		return nil, nil
	}
	prior := in.Prior[:min(len(in.Prior), heuristicPrior)]
	// Earlier episodes of this job count as prior for the later ones.
	ptexts := make([]string, 0, len(prior)+len(spans))
	for _, m := range prior {
		ptexts = append(ptexts, topicText(m.Content))
	}
	for _, sp := range spans {
		ptexts = append(ptexts, topicText(episodeContent(msgs[sp[0]:sp[1]])))
	}
	pembs, err := h.embed.Embed(ctx, ptexts)
	if err != nil {
		return nil, fmt.Errorf("embed %d memories for novelty: %w", len(ptexts), err)
	}
	eps := make([]episode, len(spans))
	for i, sp := range spans {
		self := pembs[len(prior)+i]
		best := 0.0
		for _, o := range pembs[:len(prior)+i] {
			best = math.Max(best, cosine(self, o))
		}
		eps[i] = episode{
			Messages: msgs[sp[0]:sp[1]],
			Surprise: math.Round(math.Min(1, math.Max(0, 1-best))*1000) / 1000,
		}
	}
	return eps, nil
}

// topicText is the text the offline segmenter embeds: content words only,
// so greetings and function words do not make two topics look alike.
func topicText(s string) string {
	t := terms(s)
	if len(t) == 0 {
		return strings.ToLower(strings.TrimSpace(s))
	}
	return strings.Join(t, " ")
}

// cutEpisodes returns the [start, end) message spans to store.
func cutEpisodes(embs [][]float32, forced bool, s settings) [][2]int {
	n, w := len(embs), s.Window
	var out [][2]int
	start := 0
	sim := func(i int) float64 {
		return cosine(mean(embs[max(start, i-w):i]), mean(embs[i:min(n, i+w)]))
	}
	windowAfter := func(i int) bool { return forced || n-i >= w }
	for {
		cut := -1
		last := min(n-1, start+s.EpisodeMax)
		for i := start + s.EpisodeMin; i <= last && windowAfter(i); i++ {
			if sim(i) >= s.ShiftSimilarity {
				continue
			}
			// The shift may show a little before its lowest point: take the
			// weakest boundary within one window.
			cut = i
			for j := i + 1; j < i+w && j <= last && windowAfter(j); j++ {
				if sim(j) < sim(cut) {
					cut = j
				}
			}
			break
		}
		if cut < 0 && n-start > s.EpisodeMax {
			cut = start + s.EpisodeMin
			for i := cut + 1; i <= start+s.EpisodeMax; i++ {
				if sim(i) <= sim(cut) { // ties: the longer episode
					cut = i
				}
			}
		}
		if cut < 0 {
			break
		}
		out = append(out, [2]int{start, cut})
		start = cut
	}
	tail := n - start
	if tail > 0 && (forced || tail >= s.EpisodeMax) {
		if tail < s.EpisodeMin && len(out) > 0 {
			out[len(out)-1][1] = n
		} else {
			out = append(out, [2]int{start, n})
		}
	}
	return out
}
