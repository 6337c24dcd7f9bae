package locomo

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const synthetic = "testdata/synthetic.json"

func TestLoadSynthetic(t *testing.T) {
	d, err := Load(synthetic)
	require.NoError(t, err)
	require.Equal(t, "LoCoMo", d.Benchmark)
	require.Equal(t, "synthetic.json", d.Name)
	require.Equal(t, []string{"multi-hop", "temporal", "open-domain", "single-hop"}, d.Categories)
	convs := d.Conversations
	require.Len(t, convs, 2)
	c := convs[0]
	require.Equal(t, "syn-1", c.ID)
	require.Equal(t, TurnSpacing, c.Spacing)

	// Sessions in numeric order (10 after 2); a date without turns is no session.
	require.Len(t, c.Sessions, 3)
	require.Equal(t, []string{"D1:1", "D2:1", "D10:1"}, []string{c.Sessions[0].Turns[0].ID, c.Sessions[1].Turns[0].ID, c.Sessions[2].Turns[0].ID})
	require.Equal(t, time.Date(2024, 3, 10, 16, 40, 0, 0, time.UTC), c.Sessions[1].At)
	require.Equal(t, time.Date(2024, 4, 2, 0, 5, 0, 0, time.UTC), c.Sessions[2].At)
	require.Equal(t, 17, c.TurnCount())

	// Captions are appended; a turn that is only an image is its caption.
	require.Equal(t, "Pixel sleeps on my keyboard all day. [shares a photo of a grey cat lying on a laptop]", c.Sessions[1].Turns[1].Text)
	require.Equal(t, "[shares a photo of a cello in a case]", c.Sessions[1].Turns[4].Text)
	require.Equal(t, "D10:3", c.Sessions[2].Turns[2].ID)
	require.Equal(t, "Ana", c.Sessions[2].Turns[2].Speaker)

	// Category 5 and questions without evidence are skipped and counted.
	require.Equal(t, map[string]int{SkipCategory5: 1, SkipNoEvidence: 1}, c.Skipped)
	require.Len(t, c.Questions, 4)
	require.Equal(t, 2, c.Questions[2].Index)
	require.Equal(t, "multi-hop", c.Questions[2].Category)
	require.Equal(t, []string{"D10:3", "D2:4"}, c.Questions[2].Evidence, "split on ';' and trimmed")
	require.Equal(t, []string{"D2:2", "D9:99"}, c.Questions[3].Evidence, "an id that names no turn is kept (the harness counts it missed)")
	require.Nil(t, c.Questions[3].Measure, "LoCoMo has no extra measures")

	// A category given as a string and a numeric answer are accepted.
	require.Len(t, convs[1].Questions, 2)
	require.Equal(t, "single-hop", convs[1].Questions[1].Category)
}

func TestSplitEvidence(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want []string
	}{
		{[]string{"D1:3"}, []string{"D1:3"}},
		{[]string{"D8:6; D9:17"}, []string{"D8:6", "D9:17"}},
		{[]string{" D8:6 ;D9:17;", "D8:6", ""}, []string{"D8:6", "D9:17"}},
		{[]string{"D1:1", "D1:2", "D1:1"}, []string{"D1:1", "D1:2"}},
		{nil, nil},
	} {
		require.Equal(t, tc.want, SplitEvidence(tc.in), "%q", tc.in)
	}
}

func TestParseSessionTime(t *testing.T) {
	for in, want := range map[string]time.Time{
		"1:56 pm on 8 May, 2023":          time.Date(2023, 5, 8, 13, 56, 0, 0, time.UTC),
		"12:06 am on 11 November, 2022":   time.Date(2022, 11, 11, 0, 6, 0, 0, time.UTC),
		"12:30 pm on 1 January, 2024":     time.Date(2024, 1, 1, 12, 30, 0, 0, time.UTC),
		"10:04 AM on 19 December, 2023":   time.Date(2023, 12, 19, 10, 4, 0, 0, time.UTC),
		"  7:31 pm  on 21 January, 2022 ": time.Date(2022, 1, 21, 19, 31, 0, 0, time.UTC),
		"3:00 pm on 2 Oct, 2023":          time.Date(2023, 10, 2, 15, 0, 0, 0, time.UTC),
	} {
		got, err := ParseSessionTime(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "yesterday", "25:00 pm on 8 May, 2023", "1:56 pm on 31 February, 2023"} {
		_, err := ParseSessionTime(bad)
		require.Error(t, err, bad)
	}
}

func TestParseRejectsBadInput(t *testing.T) {
	for name, in := range map[string]string{
		"not json":        `{`,
		"not a list":      `{"sample_id": "x"}`,
		"empty list":      `[]`,
		"no conversation": `[{"sample_id": "x", "qa": []}]`,
		"no sessions":     `[{"sample_id": "x", "conversation": {"speaker_a": "A"}, "qa": []}]`,
		"missing date": `[{"sample_id": "x", "conversation": {
			"session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}]}, "qa": []}]`,
		"bad date": `[{"sample_id": "x", "conversation": {"session_1_date_time": "soon",
			"session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}]}, "qa": []}]`,
		"duplicate dia_id": `[{"sample_id": "x", "conversation": {"session_1_date_time": "1:56 pm on 8 May, 2023",
			"session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}, {"speaker": "B", "dia_id": "D1:1", "text": "yo"}]}, "qa": []}]`,
		"no speaker": `[{"sample_id": "x", "conversation": {"session_1_date_time": "1:56 pm on 8 May, 2023",
			"session_1": [{"dia_id": "D1:1", "text": "hi"}]}, "qa": []}]`,
		"bad category": `[{"sample_id": "x", "conversation": {"session_1_date_time": "1:56 pm on 8 May, 2023",
			"session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}]},
			"qa": [{"question": "q?", "evidence": ["D1:1"], "category": 9}]}]`,
		"duplicate sample": `[
			{"sample_id": "x", "conversation": {"session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}]}},
			{"sample_id": "x", "conversation": {"session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}]}}]`,
	} {
		_, err := Parse([]byte(in))
		require.Error(t, err, name)
		require.True(t, errors.Is(err, ErrFormat), "%s: %v", name, err)
	}
	_, err := Load("testdata/does-not-exist.json")
	require.Error(t, err)
}
