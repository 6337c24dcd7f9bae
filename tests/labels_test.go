package tests

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/migrate"
)

// The offline labeller, both ways: each example gets its label, and each
// near miss (the same words without what makes the label) does not.
func TestAutoLabel(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			db := dbtest.New(t, dbtest.WithVector(variant))
			ctx := context.Background()
			at := time.Date(2026, 3, 5, 12, 0, 0, 0, time.UTC)
			cases := []struct {
				text, want string
			}{
				// trivial: nothing but greetings, thanks and small talk.
				{"Hi! Thanks so much, have a great day!", "trivial"},
				{"Hey Mel! Good to see you! How are you?", "trivial"},
				{"ok cool, thank you :)", "trivial"},
				{"Thanks! My flight lands at 6.", "general"},               // a fact follows the thanks
				{"Hey, the museum opened a new wing on glass.", "general"}, // a greeting, then a fact

				// important: remember this, important, decisions, commitments.
				{"Please remember this: the spare key is under the blue pot.", "important"},
				{"Important: the invoice must go out before the audit.", "important"},
				{"We decided to move the launch to the spring.", "important"},
				{"I promise I'll call my grandmother every Sunday.", "important"},
				{"It's not important, just a thought about the garden.", "general"},
				{"That detail seemed unimportant to the story.", "general"},
				{"I couldn't decide between the two jackets.", "general"},

				// user_profile: stable first-person facts.
				{"My name is Dana and I grew up near the coast.", "user_profile"},
				{"I live in Lisbon with my partner.", "user_profile"},
				{"I work as a nurse at the city hospital.", "user_profile"},
				{"My sister lives in Boston and has two kids.", "user_profile"},
				{"I have two daughters.", "user_profile"},
				{"I prefer tea over coffee, always have.", "user_profile"},
				{"My favourite band is Radiohead.", "user_profile"},
				{"Dana's name came up; she lives in Lisbon.", "general"}, // third person
				{"I like that idea for the poster.", "general"},          // liking a proposal is no preference
				{"The nurse at the hospital was kind.", "general"},

				// temporary: time-bound plans and states.
				{"I'm going to the dentist tomorrow at nine.", "temporary"},
				{"Tonight we're cooking pasta with friends.", "temporary"},
				{"I have to finish the slides this week.", "temporary"},
				{"I'm feeling a bit sick today.", "temporary"},
				{"The exam is on 2026-03-12.", "temporary"}, // a date 7 days after at
				{"Her flight lands on March 9.", "temporary"},
				{"I went to the dentist yesterday.", "general"}, // past, not a plan
				{"Today is the anniversary of the first moon landing documentary.", "general"},
				{"The exam was on 2026-01-12.", "general"},      // a date in the past
				{"The conference is on 2026-06-20.", "general"}, // months away
				{"We talked about how tomorrow never comes.", "general"},

				// general: none of the above.
				{"The museum has a new exhibit on Roman glass.", "general"},
				{"Photosynthesis turns light into chemical energy.", "general"},
			}
			for _, c := range cases {
				var got string
				require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.auto_label($1, $2)`, c.text, at).Scan(&got))
				require.Equal(t, c.want, got, "auto_label(%q)", c.text)
			}
			// Without a reference time, dates do not count (words still do).
			var got string
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.auto_label('The exam is on 2026-03-12.')`).Scan(&got))
			require.Equal(t, "general", got)

			_, err := db.Pool.Exec(ctx, `SELECT mneme.auto_label(NULL)`)
			require.Equal(t, "22004", sqlState(t, err)) // NULL where a value is needed
			_, err = db.Pool.Exec(ctx, `SELECT mneme.auto_label('   ')`)
			require.Equal(t, "22023", sqlState(t, err))
		})
	}
}

// An episode is labelled from its messages: one time-bound remark among
// other things does not make it temporary; a plan throughout does.
func TestEpisodeLabel(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			db := dbtest.New(t, dbtest.WithVector(variant))
			ctx := context.Background()
			at := time.Date(2026, 3, 5, 12, 0, 0, 0, time.UTC)
			cases := []struct {
				msgs []string
				want string
			}{
				{[]string{"Hi!", "Hello, how are you?", "Thanks, have a great day!"}, "trivial"},
				{[]string{"I'm going to the dentist tomorrow.", "Good luck!", "I'll need to leave at 3 today."}, "temporary"},
				{[]string{"I'm going to a support group tonight.", "The museum has a new wing on glass.",
					"The wing has Roman bowls.", "Sounds great!"}, "general"},
				{[]string{"We hiked the ridge last spring.", "My sister lives in Porto.", "Nice!"}, "user_profile"},
				{[]string{"Please remember this: the spare key is under the pot.", "Got it."}, "important"},
				{[]string{"The museum has a new exhibit on Roman glass.", "Photosynthesis turns light into energy."}, "general"},
			}
			for _, c := range cases {
				var got string
				require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.episode_label($1, $2)`, c.msgs, at).Scan(&got))
				require.Equal(t, c.want, got, "episode_label(%q)", c.msgs)
			}
			for q, code := range map[string]string{`SELECT mneme.episode_label(NULL)`: "22004", `SELECT mneme.episode_label('{}')`: "22023"} {
				_, err := db.Pool.Exec(ctx, q)
				require.Equal(t, code, sqlState(t, err), q)
			}
		})
	}
}

// One vocabulary: remember, create_episode and check_label accept the
// same labels and reject the same ones; remember without a label labels
// the memory offline and gives it the label's initial stability.
func TestLabelVocabulary(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			db := dbtest.New(t, dbtest.WithVector(variant))
			ctx := context.Background()
			var labels []string
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.labels()`).Scan(&labels))
			require.Equal(t, []string{"important", "user_profile", "general", "temporary", "trivial", "project_<name>"}, labels)

			for _, ok := range []string{"important", "user_profile", "general", "temporary", "trivial", "project_website", "project_x2_y"} {
				var is bool
				require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.is_label($1)`, ok).Scan(&is))
				require.True(t, is, ok)
			}
			conv := uuid.New()
			for _, bad := range []string{"", "General", "project_", "project-x", "project_X", "misc", "project_<name>", "user profile"} {
				var is bool
				require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.is_label($1)`, bad).Scan(&is))
				require.False(t, is, bad)
				_, err := db.Pool.Exec(ctx, `SELECT mneme.check_label($1)`, bad)
				require.Equal(t, "22023", sqlState(t, err), bad)
				_, err = db.Pool.Exec(ctx, `SELECT mneme.remember($1, 'the garage code is 4711', $2)`, conv, bad)
				require.Equal(t, "22023", sqlState(t, err), bad)
				require.ErrorContains(t, err, "unknown label")
			}
			var n int
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.memories`).Scan(&n))
			require.Zero(t, n, "a rejected remember writes nothing")
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.memory_events`).Scan(&n))
			require.Zero(t, n)

			// No label: the offline labeller decides, and the state follows the label.
			for text, want := range map[string]string{
				"My name is Sam and I live in Leeds.":               "user_profile",
				"Remember this: the boiler needs a service in May.": "important",
				"I'm meeting Jo for lunch tomorrow.":                "temporary",
				"thanks, bye!":                                      "trivial",
				"The river floods every few winters.":               "general",
			} {
				var id uuid.UUID
				var label string
				var stability, s0 float64
				var state string
				require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, $2)`, conv, text).Scan(&id))
				require.NoError(t, db.Pool.QueryRow(ctx, `SELECT label, stability, fsrs_state FROM mneme.memories WHERE id = $1`, id).
					Scan(&label, &stability, &state))
				require.Equal(t, want, label, text)
				require.NoError(t, db.Pool.QueryRow(ctx, `SELECT (mneme.setting('initial_stability_days') ->> $1)::float8`, want).Scan(&s0))
				require.Equal(t, s0, stability, text)
				require.Equal(t, "review", state)
			}
			// An explicit label wins over the rules.
			var id uuid.UUID
			var label string
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'thanks, bye!', 'project_chat')`, conv).Scan(&id))
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT label FROM mneme.memories WHERE id = $1`, id).Scan(&label))
			require.Equal(t, "project_chat", label)
		})
	}
}

// TestLabelColumnTakesTheVocabulary: the memories.label CHECK is
// mneme.is_label, so even a direct write (as the owner) cannot store a
// label outside the vocabulary; a database holding such rows from before
// migrates with the CHECK on new rows only, the old rows left as they are.
func TestLabelColumnTakesTheVocabulary(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	conv := uuid.New()
	for _, l := range []string{"project_", "Project_x", "projectx", "general2", "project_" + strings.Repeat("x", 57)} {
		_, err := db.Pool.Exec(ctx, `INSERT INTO mneme.memories (conversation_id, content, label) VALUES ($1, 'x', $2)`, conv, l)
		require.Equal(t, "23514", sqlState(t, err), l)
	}
	_, err := db.Pool.Exec(ctx, `INSERT INTO mneme.memories (conversation_id, content, label) VALUES ($1, 'x', 'project_x1')`, conv)
	require.NoError(t, err)

	// A row from before the CHECK: migrate keeps it and checks new rows.
	_, err = db.Pool.Exec(ctx, `ALTER TABLE mneme.memories DROP CONSTRAINT memories_label_check`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `INSERT INTO mneme.memories (conversation_id, content, label) VALUES ($1, 'old', 'legacy_label')`, conv)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `ALTER TABLE mneme.memories ADD CONSTRAINT memories_label_check CHECK (label ~ '^[a-z][a-z0-9_]*$')`)
	require.NoError(t, err)
	_, err = migrate.Run(ctx, db.URL, migrate.Options{Vector: db.Variant})
	require.NoError(t, err)
	var def string
	var valid bool
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT pg_get_constraintdef(oid), convalidated FROM pg_constraint
		WHERE conrelid = 'mneme.memories'::regclass AND conname = 'memories_label_check'`).Scan(&def, &valid))
	require.Contains(t, def, "is_label")
	require.False(t, valid, "the old row is not validated")
	_, err = db.Pool.Exec(ctx, `INSERT INTO mneme.memories (conversation_id, content, label) VALUES ($1, 'x', 'legacy_label')`, conv)
	require.Equal(t, "23514", sqlState(t, err), "new rows are checked")
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.memories WHERE label = 'legacy_label'`).Scan(&n))
	require.Equal(t, 1, n, "nothing lost")
}
