package tests

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// TestReadsForPeople: the read functions of mneme ui, as mneme_app (the
// least privileged role that reads): a tenant's conversations with their
// counts, a conversation's messages with the episode each went into, its
// memories, a memory's reviews and events (an erased memory's tombstone
// too); another tenant's conversation gives no rows and its memory P0002;
// bad arguments are 22004 and 22023.
func TestReadsForPeople(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			ctx := context.Background()
			db := dbtest.New(t, dbtest.WithVector(variant))
			app := appWithTenants(t, db, "ta", "tb")
			convA, convB := uuid.New(), uuid.New()
			var ep, fact, other uuid.UUID
			require.NoError(t, inTenant(t, app, "ta", func(tx pgx.Tx) error {
				for i, m := range []string{"I bake bread on Sundays.", "Sourdough needs a starter.", "Mine is called Clint."} {
					if _, err := tx.Exec(ctx, `SELECT mneme.add_message($1, 'user', $2, now() - interval '1 hour' + $3 * interval '1 minute')`, convA, m, i); err != nil {
						return err
					}
				}
				return tx.QueryRow(ctx, `SELECT mneme.remember($1, 'The starter is called Clint')`, convA).Scan(&fact)
			}))
			require.NoError(t, inTenant(t, app, "tb", func(tx pgx.Tx) error {
				return tx.QueryRow(ctx, `SELECT mneme.remember($1, 'Tb''s secret: marrowbone')`, convB).Scan(&other)
			}))
			// The sidecar's part: an episode of the first two messages and a review.
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.create_episode($1, ARRAY(SELECT id FROM mneme.messages WHERE conversation_id = $1 ORDER BY id LIMIT 2),
			        'bread', 'Bread on Sundays', NULL, 0.1, NULL, false, NULL, NULL)`, convA).Scan(&ep))
			_, err := db.Pool.Exec(ctx, `SELECT mneme.apply_review($1, 'good', 50, 5, 'review', now(), 'heuristic', ARRAY['what do I bake'])`, ep)
			require.NoError(t, err)

			require.NoError(t, inTenant(t, app, "ta", func(tx pgx.Tx) error {
				var id uuid.UUID
				var msgs, queued, mems, active, pending, failed int64
				var reviews int
				require.NoError(t, tx.QueryRow(ctx, `SELECT conversation_id, messages, queued_messages, memories, active_memories, pending_jobs, failed_jobs, pending_reviews
				        FROM mneme.conversations()`).Scan(&id, &msgs, &queued, &mems, &active, &pending, &failed, &reviews))
				require.Equal(t, []any{convA, int64(3), int64(1), int64(2), int64(2), int64(0)}, []any{id, msgs, queued, mems, active, failed})
				var n int
				require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM mneme.conversations(10000)`).Scan(&n))
				require.Equal(t, 1, n, "only its tenant's conversation")

				rows, err := tx.Query(ctx, `SELECT memory_id FROM mneme.conversation_messages($1)`, convA)
				require.NoError(t, err)
				eps, err := pgx.CollectRows(rows, pgx.RowTo[*uuid.UUID])
				require.NoError(t, err)
				require.Len(t, eps, 3)
				require.Equal(t, ep, *eps[0])
				require.Equal(t, ep, *eps[1])
				require.Nil(t, eps[2], "still queued")
				require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM mneme.conversation_memories($1)`, convA).Scan(&n))
				require.Equal(t, 2, n)
				var rating string
				var queries []string
				require.NoError(t, tx.QueryRow(ctx, `SELECT rating, matched_queries FROM mneme.memory_reviews($1)`, ep).Scan(&rating, &queries))
				require.Equal(t, "good", rating)
				require.Equal(t, []string{"what do I bake"}, queries)
				require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM mneme.memory_event_log($1) WHERE event IN ('created', 'reviewed')`, ep).Scan(&n))
				require.Equal(t, 2, n)

				// Another tenant's rows: none, and its memory does not exist.
				require.NoError(t, tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM mneme.conversation_messages($1)) + (SELECT count(*) FROM mneme.conversation_memories($1))`, convB).Scan(&n))
				require.Zero(t, n)
				return nil
			}))
			for _, q := range []string{`SELECT * FROM mneme.memory_reviews($1)`, `SELECT * FROM mneme.memory_event_log($1)`} {
				err := inTenant(t, app, "ta", func(tx pgx.Tx) error { _, err := tx.Exec(ctx, q, other); return err })
				require.Equal(t, "P0002", sqlState(t, err), q)
			}
			for q, state := range map[string]string{
				`SELECT * FROM mneme.conversations(0)`:                    "22023",
				`SELECT * FROM mneme.conversations(10001)`:                "22023",
				`SELECT * FROM mneme.conversations(NULL)`:                 "22004", // the NULL rule (docs/sql-api.md)
				`SELECT * FROM mneme.conversation_messages(NULL)`:         "22004",
				`SELECT * FROM mneme.conversation_memories(NULL)`:         "22004",
				`SELECT * FROM mneme.memory_reviews(NULL)`:                "22004",
				`SELECT * FROM mneme.memory_event_log(NULL)`:              "22004",
				`SELECT * FROM mneme.memory_reviews(gen_random_uuid())`:   "P0002",
				`SELECT * FROM mneme.memory_event_log(gen_random_uuid())`: "P0002",
			} {
				_, err := app.Exec(ctx, q)
				require.Equal(t, state, sqlState(t, err), q)
			}

			// Erased: the tombstone's events stay readable, the content goes.
			_, err = db.Pool.Exec(ctx, `SELECT mneme.set_tenant('ta'), mneme.erase($1, 'user request 9')`, fact)
			require.NoError(t, err)
			require.NoError(t, inTenant(t, app, "ta", func(tx pgx.Tx) error {
				var events []string
				rows, err := tx.Query(ctx, `SELECT event FROM mneme.memory_event_log($1)`, fact)
				require.NoError(t, err)
				events, err = pgx.CollectRows(rows, pgx.RowTo[string])
				require.NoError(t, err)
				require.Contains(t, events, "erased")
				var n int
				require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM mneme.conversation_memories($1) WHERE content LIKE '%Clint%'`, convA).Scan(&n))
				require.Zero(t, n)
				return nil
			}))
		})
	}
}
