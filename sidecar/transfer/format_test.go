package transfer

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestKindOf(t *testing.T) {
	require.Equal(t, "memory", kindOf([]byte(`{"id": "x", "kind": "semantic", "type": "memory", "content": "\"type\": \"event\""}`)))
	require.Equal(t, "", kindOf([]byte(`{"content": "no type"}`)))
}

func TestHeaderValidate(t *testing.T) {
	h := Header{Type: "header", Format: FormatName, Version: 1, EmbeddingDim: 256, ExportedAt: "2026-11-27T08:00:00.000000Z"}
	require.NoError(t, h.validate())
	h.Version = 2
	require.ErrorContains(t, h.validate(), "format version 2 is not supported")
	h.Version, h.Format = 1, "other"
	require.ErrorContains(t, h.validate(), `format "other"`)
}

func TestMemoryLineValidate(t *testing.T) {
	ok := `{"type": "memory", "conversation": "9b2f7c1e-0000-4000-8000-000000000001", "id": "9b2f7c1e-0000-4000-8000-000000000002",
		"kind": "semantic", "content": "c", "surprise": 0, "stability": 3.5, "difficulty": 5, "fsrs_state": "review",
		"last_reviewed_at": "2026-01-01T00:00:00Z", "review_count": 0, "label": "general", "pinned": false,
		"status": "active", "confidence_score": 0.9, "source_type": "explicit", "metadata": {},
		"created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"}`
	var m memoryLine
	require.NoError(t, decodeStrict([]byte(ok), &m))
	require.NoError(t, m.validate())
	for bad, want := range map[string]string{
		`"status": "active"`:                   `"status": "gone"`,
		`"difficulty": 5`:                      `"difficulty": 11`,
		`"created_at": "2026-01-01T00:00:00Z"`: `"created_at": "yesterday"`,
		`"label": "general"`:                   `"label": "Not A Label"`,
		`"kind": "semantic"`:                   `"kind": "dream"`,
		`"confidence_score": 0.9`:              `"confidence_score": 1.5`,
	} {
		var m memoryLine
		require.NoError(t, decodeStrict([]byte(strings.Replace(ok, bad, want, 1)), &m), want)
		require.Error(t, m.validate(), want)
	}
	require.ErrorContains(t, decodeStrict([]byte(strings.Replace(ok, `"content": "c"`, `"content": "c", "colour": 1`, 1)), &m), "colour")
	long := strings.Replace(ok, `"content": "c"`, `"content": "c", "title": "`+strings.Repeat("é", 1001)+`"`, 1)
	require.NoError(t, decodeStrict([]byte(long), &m))
	require.ErrorContains(t, m.validate(), "title is longer than 1000")
}

func TestReaderLinesAndGzip(t *testing.T) {
	for _, gz := range []bool{false, true} {
		var buf bytes.Buffer
		w := io.Writer(&buf)
		var zw *gzip.Writer
		if gz {
			zw = gzip.NewWriter(&buf)
			w = zw
		}
		_, err := io.WriteString(w, "a\n"+strings.Repeat("b", 3<<20)+"\nlast without newline")
		require.NoError(t, err)
		if zw != nil {
			require.NoError(t, zw.Close())
		}
		r, err := newReader(&buf)
		require.NoError(t, err)
		var got []string
		for {
			l, err := r.next()
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			got = append(got, string(l))
		}
		require.Equal(t, []string{"a", strings.Repeat("b", 3<<20), "last without newline"}, got)
		require.Equal(t, 3, r.n)
	}
}

func TestMem0Times(t *testing.T) {
	for _, s := range []string{"2023-02-25T23:57:00.108347-07:00", "2024-05-10T08:30:00.5", "2024-03-01 10:00:00+00:00", "2024-03-01T10:00:00Z"} {
		_, err := parseMem0Time(s)
		require.NoError(t, err, s)
	}
	_, err := parseMem0Time("yesterday")
	require.Error(t, err)
}

// decodeRow decodes a row line in one pass only when the guessed type is
// the decoded one; anything else is left to lineType and row's decode.
func TestDecodeRow(t *testing.T) {
	ev := `{"type":"event", "conversation": "8f1c1b8e-3f5e-4a57-9d3c-1c1d2b3a4f50", "event": "created", "actor": "a", "caller": "c", "at": "2026-11-27T08:00:00Z"}`
	kind, v := decodeRow([]byte(ev))
	require.Equal(t, "event", kind)
	require.Equal(t, "created", v.(*eventLine).Event)
	for _, line := range []string{
		// the first "type" is a nested one: a guess of "event", a memory line
		`{"metadata": {"type": "event"}, "type": "memory", "content": "x"}`,
		strings.Replace(ev, `"type":"event"`, `"type": "memory"`, 1), // fails the memory decode
		strings.Replace(ev, `"at"`, `"colour": "red", "at"`, 1),      // an unknown field
		strings.Replace(ev, `}`, `} {}`, 1),                          // two values
		`{"type": "header"}`,
		`{"type": "event", "event": `, // truncated
	} {
		kind, v := decodeRow([]byte(line))
		require.Empty(t, kind, line)
		require.Nil(t, v, line)
	}
	// "type" inside a string is no key.
	kind, _ = decodeRow([]byte(`{"reason": "{\"type\": \"memory\"}", "type": "event"}`))
	require.Equal(t, "event", kind)
	// A duplicate key: the last one counts, as for lineType.
	dup := strings.Replace(ev, `"at"`, `"type": "memory", "at"`, 1)
	kind, v = decodeRow([]byte(dup))
	require.Empty(t, kind)
	require.Nil(t, v)
	k, err := lineType([]byte(dup))
	require.NoError(t, err)
	require.Equal(t, "memory", k)
}
