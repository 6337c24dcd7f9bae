package pipeline

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestEpisodeContentStampsTimeOnlyWhenItMoves(t *testing.T) {
	t0 := time.Date(2023, 5, 8, 13, 56, 0, 0, time.UTC)
	msgs := []message{
		{Role: "Caroline", Content: " Hey Mel! ", At: t0},
		{Role: "Melanie", Content: "Hi!", At: t0.Add(5 * time.Second)},
		{Role: "Caroline", Content: "Still there?", At: t0.Add(9 * time.Minute)},
		{Role: "Melanie", Content: "Back now.", At: t0.Add(25 * time.Minute)},
		{Role: "Caroline", Content: "Good.", At: t0.Add(30 * time.Minute)},
	}
	require.Equal(t, "[2023-05-08 13:56] Caroline: Hey Mel!\n"+
		"Melanie: Hi!\n"+
		"Caroline: Still there?\n"+
		"[2023-05-08 14:21] Melanie: Back now.\n"+
		"Caroline: Good.", episodeContent(msgs))
}
