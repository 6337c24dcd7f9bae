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
//     at its weakest boundary. The segment job hands it one session at a
//     time (no episode crosses a gap); of an open session it stores only
//     what no later message can change (cutEpisodes), of a closed one
//     everything, a too-short tail joining the episode before it.
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

// cutEpisodes returns the [start, end) spans of the episodes to store of
// one session's messages. final: the session is closed (a gap or
// segment_now after it) and is stored whole, as the rules below cut it
// with every message known. Otherwise (an open session, which may still
// grow) it stores only what those rules would store whatever messages
// follow: a boundary is judged only with its full window of messages
// after it (segment_window), the weakest one within a window only when
// that whole window is judged, and an episode is stored only when at
// least segment_episode_min messages follow its end (else a short tail
// could yet be joined to it). So the episodes of a session are the same
// whether it is segmented at once or piece by piece as its messages
// arrive: a conversation's episodes depend on its messages, not on when
// the jobs ran (TestCutEpisodesIsPrefixStable).
func cutEpisodes(embs [][]float32, final bool, s settings) [][2]int {
	n, w := len(embs), s.Window
	var out [][2]int
	start := 0
	sim := func(i int) float64 {
		return cosine(mean(embs[max(start, i-w):i]), mean(embs[i:min(n, i+w)]))
	}
	// settled: sim(i) is what it will be whatever follows.
	settled := func(i int) bool { return final || i+w <= n }
	for {
		last := start + s.EpisodeMax // an episode has at most EpisodeMax messages
		if final {
			last = min(last, n-1)
		}
		cut, wait := -1, false
	scan:
		for i := start + s.EpisodeMin; i <= last; i++ {
			if !settled(i) {
				wait = true
				break
			}
			if sim(i) >= s.ShiftSimilarity {
				continue
			}
			// The shift may show a little before its lowest point: take the
			// weakest boundary within one window.
			cut = i
			for j := i + 1; j < i+w && j <= last; j++ {
				if !settled(j) {
					wait = true
					break scan
				}
				if sim(j) < sim(cut) {
					cut = j
				}
			}
			break
		}
		if wait {
			break
		}
		if cut < 0 && n-start > s.EpisodeMax {
			// No shift within the longest episode: its weakest boundary.
			// Its windows end at the first message past the longest
			// episode, as when the messages arrive one by one (before
			// issue 37 this was decided on that message's arrival).
			end := start + s.EpisodeMax + 1
			clipped := func(i int) float64 {
				return cosine(mean(embs[max(start, i-w):i]), mean(embs[i:min(end, i+w)]))
			}
			cut = start + s.EpisodeMin
			for i := cut + 1; i <= start+s.EpisodeMax; i++ {
				if clipped(i) <= clipped(cut) { // ties: the longer episode
					cut = i
				}
			}
		}
		if cut < 0 || (!final && n-cut < s.EpisodeMin) {
			break
		}
		out = append(out, [2]int{start, cut})
		start = cut
	}
	if final && n > start {
		if n-start < s.EpisodeMin && len(out) > 0 {
			out[len(out)-1][1] = n // a short tail joins the episode before it
		} else {
			out = append(out, [2]int{start, n})
		}
	}
	return out
}
