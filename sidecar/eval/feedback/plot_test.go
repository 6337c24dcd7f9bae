package feedback

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func sample() Result {
	r := Result{Sessions: 12, K: 5, NewAnswersAt: 7, RelevantStability: map[Policy]float64{}, NoiseStability: map[Policy]float64{}}
	for s := 1; s <= 12; s++ {
		r.Points = append(r.Points, Point{Session: s, Queries: 3, Precision: map[Policy]float64{AutoGood: 0.4, Review: 0.4 + 0.05*float64(s), None: 0.4}})
	}
	return r
}

func TestWriteSVGIsWellFormed(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteSVG(&b, sample()))
	dec := xml.NewDecoder(&b)
	lines := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			lines++
		}
	}
	require.Equal(t, 3, lines)
}

func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteTable(&b, sample()))
	out := b.String()
	require.True(t, strings.HasPrefix(out, "| session | auto-good | review | none |\n"))
	require.Contains(t, out, "| 10 | 0.400 | 0.900 | 0.400 |")
	require.Contains(t, out, "| mean of sessions 8-12 | 0.400 | 0.900 | 0.400 |")
}

// The workload is fixed: the same needs, memories and schedule every run.
func TestWorkloadIsFixed(t *testing.T) {
	a, ha := buildWorkload()
	b, hb := buildWorkload()
	require.Equal(t, a, b)
	require.Equal(t, ha, hb)
	require.Len(t, a, 12)
	for _, n := range a {
		require.Len(t, n.Relevant, 5)
		require.Len(t, n.Lookalikes, 5)
		require.Len(t, n.Later, 5)
		for _, m := range append(append(append([]string{}, n.Relevant...), n.Lookalikes...), n.Later...) {
			require.Contains(t, m, n.Query, "every memory names its need")
		}
	}
}
