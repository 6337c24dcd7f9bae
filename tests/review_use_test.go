package tests

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

var umbrellaSession = [][2]string{
	{"user", "Will it rain in Hamburg tomorrow?"},
	{"assistant", "Showers are likely in the afternoon, with sunny spells in the morning."},
	{"user", "Yes, I will take an umbrella anyway, the weather changes fast."},
	{"assistant", "An umbrella is a safe bet with weather like that."},
	{"user", "Thanks, that settles it."},
}

var lifetimesSession = [][2]string{
	{"user", "Back to Rust: lifetimes in struct definitions still trip me up."},
	{"assistant", "A struct holding a reference needs a lifetime parameter so the struct cannot outlive the data."},
	{"user", "So the borrow checker rejects my parser struct because the input string is dropped first?"},
	{"assistant", "Exactly: keep the input alive longer, or store an owned String in the struct."},
	{"user", "I will write the command line tool with owned strings then, clap for the arguments."},
	{"assistant", "Good plan: clap's derive API keeps the argument parsing short."},
}

// The offline reviewer judges use: of two memories retrieved before a
// session that talks only about Rust lifetimes, the Rust one is rated good
// or easy, the weather one again, and its stability falls. Drained after
// the messages, and with the sidecar live while they arrive (issue 37 found
// the scenario tested only drained).
func TestReviewerJudgesUse(t *testing.T) {
	t.Parallel()
	for _, live := range []bool{false, true} {
		t.Run(map[bool]string{false: "drained", true: "live"}[live], func(t *testing.T) {
			reviewerJudgesUse(t, live)
		})
	}
}

func reviewerJudgesUse(t *testing.T, live bool) {
	e := newPipelineEnv(t, false)
	ctx := context.Background()
	drain := e.drain
	if live {
		_, workerURL := e.db.PoolAs(t, "mneme_worker")
		startSidecar(t, workerURL, "")
		drain = func() { waitIdle(t, e.db.Pool) }
	}
	_, err := e.db.Pool.Exec(ctx, `SELECT mneme.set_setting('segment_shift_similarity', '-1')`)
	require.NoError(t, err)
	base := time.Now().UTC().Add(-10 * 24 * time.Hour).Truncate(time.Minute)
	e.session(base, umbrellaSession)
	e.session(base.Add(24*time.Hour), rustSession)
	_, err = e.db.Pool.Exec(ctx, `SELECT mneme.segment_now($1)`, e.conv)
	require.NoError(t, err)
	drain()
	var umbrella, rust uuid.UUID
	for _, m := range e.memories() {
		switch {
		case strings.Contains(m.Content, "umbrella"):
			umbrella = m.ID
		case strings.Contains(m.Content, "borrow checker"):
			rust = m.ID
		}
	}
	require.NotEqual(t, uuid.Nil, umbrella)
	require.NotEqual(t, uuid.Nil, rust)
	require.Equal(t, []uuid.UUID{umbrella}, e.search("take an umbrella, the weather changes fast", 1))
	require.Equal(t, []uuid.UUID{rust}, e.search("the borrow checker and lifetimes confuse me", 1))
	before := e.memory(umbrella).Stability

	e.session(base.Add(3*24*time.Hour), lifetimesSession)
	e.say(base.Add(5*24*time.Hour).Format(time.RFC3339), "user", "Another question for later today.")
	drain()
	rating := func(id uuid.UUID) string {
		var r string
		require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT rating FROM mneme.review_log WHERE memory_id = $1 ORDER BY id DESC LIMIT 1`, id).Scan(&r))
		return r
	}
	require.Contains(t, []string{"good", "easy"}, rating(rust), "the memory the session used")
	require.Equal(t, "again", rating(umbrella), "the memory nothing after the retrieval mentions")
	require.Less(t, e.memory(umbrella).Stability, before)
}
