package pipeline

import (
	"math"
	"regexp"
	"strings"
	"unicode"

	"github.com/mneme-memory/mneme/sidecar/stem"
)

// The offline segmenter and reviewer work on content words: lower-cased
// letters and digits, stop words and words under three characters
// dropped, endings trimmed by stem.Word so "lifetimes" meets
// "lifetime". Deterministic and language-naive on purpose.

var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`
a about above after again against all also am an and any are aren as at be because been before being
below between both but by can cannot could couldn did didn do does doesn doing don down during each
few for from further get gets got had hadn has hasn have haven having he her here hers herself him
himself his how i if in into is isn it its itself just let lets like me more most much must my myself
no nor not now of off on once one only or other ought our ours ourselves out over own really same
shan she should shouldn so some such than that thats the their theirs them themselves then there these
they this those through to too under until up us very was wasn we well were weren what when where
which while who whom why will with won would wouldn yes yet you your yours yourself yourselves
yeah okay ok oh hey hi hello thanks thank sure great good nice cool wow lol haha
going want wanted know think thought said say says tell told make made way thing things something
anything everything lot lots kind sort maybe actually definitely pretty quite still even ever always
never sometimes today yesterday tomorrow time times day days week weeks year years ago new old
feel feeling felt love glad happy sounds sound awesome amazing totally absolutely
next last first back right different topic together perfect start stop where two three need needs use used
look looking try trying done doing come came take took give gave put find found keep`) {
		m[w] = true
	}
	return m
}()

var wordRE = regexp.MustCompile(`[\p{L}\p{N}]+`)

// terms returns the content words of s, in order, with repeats.
func terms(s string) []string {
	var out []string
	for _, w := range wordRE.FindAllString(strings.ToLower(s), -1) {
		if len([]rune(w)) < 3 || stopWords[w] || isNumber(w) {
			continue
		}
		w = stem.Word(w)
		if len([]rune(w)) < 3 || stopWords[w] {
			continue
		}
		out = append(out, w)
	}
	return out
}

func isNumber(w string) bool {
	for _, r := range w {
		if !unicode.IsDigit(r) {
			return false
		}
	}
	return true
}

// termSet is the distinct content words of the texts.
func termSet(texts ...string) map[string]bool {
	m := map[string]bool{}
	for _, t := range texts {
		for _, w := range terms(t) {
			m[w] = true
		}
	}
	return m
}

func cosine(a, b []float32) float64 {
	if len(a) != len(b) || len(a) == 0 {
		return 0
	}
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

// mean is the centroid of vectors (nil for none).
func mean(vs [][]float32) []float32 {
	if len(vs) == 0 {
		return nil
	}
	out := make([]float32, len(vs[0]))
	for _, v := range vs {
		for i := range out {
			if i < len(v) {
				out[i] += v[i]
			}
		}
	}
	for i := range out {
		out[i] /= float32(len(vs))
	}
	return out
}
