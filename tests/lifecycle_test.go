package tests

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/fsrs"
)

// SQL's initial state (mneme.initial_state, and the insert trigger) equals
// go-fsrs's through sidecar/fsrs.Initial, for every label and surprise.
func TestInitialStateMatchesGoFSRS(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			db := dbtest.New(t, dbtest.WithVector(variant))
			ctx := context.Background()
			var days map[string]float64
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.setting('initial_stability_days')`).Scan(&days))
			require.Equal(t, map[string]float64{"trivial": 3, "temporary": 14, "general": 900, "project": 900, "user_profile": 3650, "important": 3650}, days)
			conv := uuid.New()
			for _, label := range []string{"trivial", "temporary", "general", "project_garden", "user_profile", "important"} {
				key := label
				if label == "project_garden" {
					key = "project"
				}
				for _, surprise := range []float64{0, 0.25, 0.5, 1} {
					want := fsrs.Initial(days[key], surprise, time.Now())
					var s, d float64
					var state string
					require.NoError(t, db.Pool.QueryRow(ctx, `SELECT * FROM mneme.initial_state($1, $2)`, label, surprise).Scan(&s, &d, &state))
					require.InDelta(t, want.Stability, s, 1e-9, "%s %v", label, surprise)
					require.InDelta(t, want.Difficulty, d, 1e-9)
					require.Equal(t, string(want.Phase), state)
					// The insert trigger gives the same to a row that leaves the state out.
					require.NoError(t, db.Pool.QueryRow(ctx, `INSERT INTO mneme.memories (conversation_id, content, label, surprise)
						VALUES ($1, 'x', $2, $3) RETURNING stability, difficulty, fsrs_state`, conv, label, surprise).Scan(&s, &d, &state))
					require.InDelta(t, want.Stability, s, 1e-6) // surprise is a real column
					require.InDelta(t, want.Difficulty, d, 1e-9)
					require.Equal(t, "review", state)
				}
			}
			// An explicit state is kept.
			var s float64
			require.NoError(t, db.Pool.QueryRow(ctx, `INSERT INTO mneme.memories (conversation_id, content, stability)
				VALUES ($1, 'x', 2.5) RETURNING stability`, conv).Scan(&s))
			require.Equal(t, 2.5, s)

			// Bad input: a clear error.
			for q, code := range map[string]string{
				`SELECT * FROM mneme.initial_state('misc')`:          "22023",
				`SELECT * FROM mneme.initial_state(NULL)`:            "22004", // NULL where a value is needed
				`SELECT * FROM mneme.initial_state('general', 1.5)`:  "22023",
				`SELECT * FROM mneme.initial_state('general', NULL)`: "22004",
			} {
				_, err := db.Pool.Exec(ctx, q)
				require.Equal(t, code, sqlState(t, err), q)
			}
			_, err := db.Pool.Exec(ctx, `SELECT mneme.set_setting('initial_stability_days', '{"general": -1}')`)
			require.Equal(t, "22023", sqlState(t, err), "set_setting checks the rule")
			forceSetting(t, db, "initial_stability_days", `{"general": -1}`)
			_, err = db.Pool.Exec(ctx, `SELECT * FROM mneme.initial_state('general')`)
			require.Equal(t, "22023", sqlState(t, err))
			_, err = db.Pool.Exec(ctx, `INSERT INTO mneme.memories (conversation_id, content) VALUES ($1, 'y')`, conv)
			require.Equal(t, "22023", sqlState(t, err), "a broken setting fails the insert, it does not invent a state")
		})
	}
}

// reset_initial_state moves never-reviewed memories only, and only when asked.
func TestResetInitialState(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			db := dbtest.New(t, dbtest.WithVector(variant))
			ctx := context.Background()
			conv, other := uuid.New(), uuid.New()
			old := addMemory(t, db, conv, "an old memory", map[string]any{"stability": 3.173, "difficulty": 5.28243442, "fsrs_state": "learning", "label": "user_profile"})
			reviewed := addMemory(t, db, conv, "an old reviewed memory", map[string]any{"stability": 9.0, "difficulty": 5.0, "fsrs_state": "review", "review_count": 2})
			elsewhere := addMemory(t, db, other, "another conversation", map[string]any{"stability": 3.173, "fsrs_state": "learning"})
			stab := func(id uuid.UUID) (float64, string) {
				var s float64
				var st string
				require.NoError(t, db.Pool.QueryRow(ctx, `SELECT stability, fsrs_state FROM mneme.memories WHERE id = $1`, id).Scan(&s, &st))
				return s, st
			}
			var n int64
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.reset_initial_state($1, dry_run => true)`, conv).Scan(&n))
			require.Equal(t, int64(1), n)
			s, st := stab(old)
			require.Equal(t, 3.173, s, "a dry run changes nothing")
			require.Equal(t, "learning", st)
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.reset_initial_state($1)`, conv).Scan(&n))
			require.Equal(t, int64(1), n)
			s, st = stab(old)
			require.Equal(t, 3650.0, s)
			require.Equal(t, "review", st)
			s, _ = stab(reviewed)
			require.Equal(t, 9.0, s, "reviews are evidence: kept")
			s, _ = stab(elsewhere)
			require.Equal(t, 3.173, s, "another conversation is untouched")
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.reset_initial_state()`).Scan(&n))
			require.Equal(t, int64(1), n, "all conversations")
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.reset_initial_state()`).Scan(&n))
			require.Zero(t, n, "idempotent")
			_, err := db.Pool.Exec(ctx, `SELECT mneme.reset_initial_state(NULL, NULL)`)
			require.Equal(t, "22004", sqlState(t, err))
		})
	}
}

type lifeEnv struct {
	t    *testing.T
	db   *dbtest.DB
	conv uuid.UUID
}

func (e *lifeEnv) exec(q string, args ...any) {
	e.t.Helper()
	_, err := e.db.Pool.Exec(context.Background(), q, args...)
	require.NoError(e.t, err, q)
}

func (e *lifeEnv) status(id uuid.UUID) (string, string) {
	e.t.Helper()
	var st string
	var reason *string
	require.NoError(e.t, e.db.Pool.QueryRow(context.Background(), `SELECT status, status_reason FROM mneme.memories WHERE id = $1`, id).Scan(&st, &reason))
	if reason == nil {
		return st, ""
	}
	return st, *reason
}

func (e *lifeEnv) events(id uuid.UUID) []string {
	e.t.Helper()
	var evs []string
	require.NoError(e.t, e.db.Pool.QueryRow(context.Background(),
		`SELECT coalesce(array_agg(event ORDER BY id), '{}') FROM mneme.memory_events WHERE memory_id = $1`, id).Scan(&evs))
	return evs
}

// cleanup runs the internal _cleanup at a given time (entered first on
// Citus; see runCleanup).
func (e *lifeEnv) cleanup(at time.Time, dry bool) map[string]int64 {
	e.t.Helper()
	return runCleanup(e.t, e.db.Pool, at, dry, dbtest.OnCitus())
}

// runCleanup runs the internal _cleanup at a given time, in a transaction,
// and returns its action counts. enter: on Citus it runs as mneme's owner
// on the workers, whose row security shows the rows of the caller an API
// call forwards (mneme._enter), so it enters first, as the API's calls do.
func runCleanup(t *testing.T, db interface {
	Begin(context.Context) (pgx.Tx, error)
}, at time.Time, dry, enter bool) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	out := map[string]int64{}
	require.NoError(t, pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if enter {
			if _, err := tx.Exec(ctx, `SELECT mneme._enter(NULL)`); err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, `SELECT action, count FROM mneme._cleanup($1, $2)`, at, dry)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var a string
			var n int64
			if err := rows.Scan(&a, &n); err != nil {
				return err
			}
			out[a] = n
		}
		return rows.Err()
	}))
	return out
}

func (e *lifeEnv) exists(id uuid.UUID) bool {
	var ok bool
	require.NoError(e.t, e.db.Pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM mneme.memories WHERE id = $1)`, id).Scan(&ok))
	return ok
}

// The cleanup rules: below inactive_below_r an active memory becomes
// inactive with a reason (out of retrieval, kept); pinned and important
// never; expiry is recorded once; purge only when purge_after_days is set
// and only after that long inactive; done jobs past retention go, failed
// jobs stay; a dry run changes nothing.
func TestCleanupRules(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			db := dbtest.New(t, dbtest.WithVector(variant))
			e := &lifeEnv{t: t, db: db, conv: uuid.New()}
			ctx := context.Background()
			t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
			mem := func(content string, cols map[string]any) uuid.UUID {
				cols["created_at"], cols["last_reviewed_at"] = t0, t0
				return addMemory(t, db, e.conv, content, cols)
			}
			faded := mem("the zebra crossing on elm street", map[string]any{"label": "trivial"})
			pinned := mem("the zebra crossing on elm street, pinned", map[string]any{"label": "trivial", "pinned": true})
			important := mem("the zebra crossing on elm street matters", map[string]any{"label": "important", "stability": 0.5})
			fresh := mem("the zebra crossing on elm street, general", map[string]any{"label": "general"})
			expiring := mem("the zebra crossing on elm street until spring", map[string]any{"label": "general", "valid_until": t0.AddDate(0, 2, 0)})

			// Trivial (3 days): R = 0.5 after 3 * (1/0.25 - 1) / (19/81) = 38.4 days.
			at := t0.AddDate(0, 0, 38)
			require.Equal(t, map[string]int64{"inactivated": 0, "expired": 0, "purged": 0, "jobs_pruned": 0}, e.cleanup(at, false))
			at = t0.AddDate(0, 0, 39)
			require.Equal(t, int64(1), e.cleanup(at, true)["inactivated"])
			st, _ := e.status(faded)
			require.Equal(t, "active", st, "a dry run changes nothing")
			require.Equal(t, []string{"created"}, e.events(faded))

			require.Equal(t, int64(1), e.cleanup(at, false)["inactivated"])
			st, reason := e.status(faded)
			require.Equal(t, "inactive", st)
			require.Contains(t, reason, "below inactive_below_r 0.5")
			require.Equal(t, []string{"created", "inactivated"}, e.events(faded))
			for _, id := range []uuid.UUID{pinned, important, fresh} {
				st, _ := e.status(id)
				require.Equal(t, "active", st)
			}
			// Out of retrieval, even of a search as of the past.
			var ids []uuid.UUID
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT array_agg(memory_id) FROM mneme.search($1, 'zebra crossing', 10, at => $2)`,
				e.conv, t0.AddDate(0, 0, 1)).Scan(&ids))
			require.NotContains(t, ids, faded)
			require.Contains(t, ids, pinned)

			// Expiry: recorded once, the memory stays.
			at = t0.AddDate(0, 3, 0)
			got := e.cleanup(at, false)
			require.Equal(t, int64(1), got["expired"])
			require.Equal(t, int64(0), e.cleanup(at.Add(time.Hour), false)["expired"])
			if dbtest.OnCitus() {
				// The expiry's event is inserted on the coordinator, the
				// created one by the trigger on the worker: each node takes
				// ids from its own range of the sequence (docs/scale.md).
				require.ElementsMatch(t, []string{"created", "expired"}, e.events(expiring))
			} else {
				require.Equal(t, []string{"created", "expired"}, e.events(expiring))
			}

			// Purge: off by default, whatever the time.
			require.Equal(t, int64(0), e.cleanup(t0.AddDate(5, 0, 0), false)["purged"])
			require.True(t, e.exists(faded))
			e.exec(`SELECT mneme.set_setting('purge_after_days', '90')`)
			// Inactive since day 39: not before day 129.
			require.Equal(t, int64(0), e.cleanup(t0.AddDate(0, 0, 39+89), false)["purged"])
			require.True(t, e.exists(faded))
			require.Equal(t, int64(1), e.cleanup(t0.AddDate(0, 0, 39+91), true)["purged"])
			require.True(t, e.exists(faded), "a dry run purges nothing")
			// Long-lived ones faded by now too (the important one's tiny
			// stability says it would have); only the unpinned, unimportant go.
			e.exec(`UPDATE mneme.memories SET last_reviewed_at = $2 WHERE id = $1`, important, t0.AddDate(-10, 0, 0))
			got = e.cleanup(t0.AddDate(0, 0, 39+91), false)
			require.Equal(t, int64(1), got["purged"])
			require.False(t, e.exists(faded))
			require.True(t, e.exists(pinned))
			require.True(t, e.exists(important))
			st, _ = e.status(important)
			require.Equal(t, "active", st, "important never becomes inactive")
			require.Equal(t, []string{"created", "inactivated", "purged"}, e.events(faded), "the tombstone stays")
			var reasonPurged string
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT reason FROM mneme.memory_events WHERE memory_id = $1 AND event = 'purged'`, faded).Scan(&reasonPurged))
			require.Equal(t, "inactive for more than purge_after_days 90", reasonPurged)

			// Jobs: done ones past retention go, failed ones stay.
			if dbtest.OnCitus() { // a job of no conversation is the nil conversation's there (its distribution column)
				e.exec(`INSERT INTO mneme.jobs (conversation_id, kind, state, finished_at) VALUES ($3, 'noop', 'done', $1), ($3, 'noop', 'done', $2), ($3, 'noop', 'failed', $1)`,
					t0, t0.AddDate(0, 0, 99), uuid.Nil)
			} else {
				e.exec(`INSERT INTO mneme.jobs (kind, state, finished_at) VALUES ('noop', 'done', $1), ('noop', 'done', $2), ('noop', 'failed', $1)`,
					t0, t0.AddDate(0, 0, 99))
			}
			got = e.cleanup(t0.AddDate(0, 0, 100), false)
			require.Equal(t, int64(1), got["jobs_pruned"])
			var jobs []string
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT array_agg(state ORDER BY id) FROM mneme.jobs`).Scan(&jobs))
			require.Equal(t, []string{"done", "failed"}, jobs)
			e.exec(`SELECT mneme.set_setting('jobs_retention', 'null')`)
			require.Equal(t, int64(0), e.cleanup(t0.AddDate(9, 0, 0), false)["jobs_pruned"])

			// The public form runs at now().
			rows, err := db.Pool.Query(ctx, `SELECT action FROM mneme.cleanup(dry_run => true)`)
			require.NoError(t, err)
			actions, err := pgx.CollectRows(rows, pgx.RowTo[string])
			require.NoError(t, err)
			require.Equal(t, []string{"inactivated", "expired", "purged", "jobs_pruned"}, actions)
		})
	}
}

// Bad settings and arguments: a clear error, nothing changed.
func TestCleanupBadInput(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			db := dbtest.New(t, dbtest.WithVector(variant))
			e := &lifeEnv{t: t, db: db, conv: uuid.New()}
			ctx := context.Background()
			old := time.Now().AddDate(-5, 0, 0)
			id := addMemory(t, db, e.conv, "a faded trivial memory", map[string]any{"label": "trivial", "last_reviewed_at": old, "created_at": old})
			for setting, values := range map[string][]string{
				"inactive_below_r": {`1`, `-0.1`, `"0.5"`, `null`},
				"purge_after_days": {`0`, `-3`, `"90"`},
				"jobs_retention":   {`"soon"`, `"-1 day"`, `7`},
			} {
				var before string
				require.NoError(t, db.Pool.QueryRow(ctx, `SELECT value::text FROM mneme.settings WHERE key = $1`, setting).Scan(&before))
				for _, v := range values {
					_, err := db.Pool.Exec(ctx, `SELECT mneme.set_setting($1, $2::jsonb)`, setting, v)
					require.Equal(t, "22023", sqlState(t, err), "set_setting rejects %s = %s", setting, v)
					forceSetting(t, db, setting, v) // and cleanup still checks what it reads
					_, err = db.Pool.Exec(ctx, `SELECT * FROM mneme.cleanup()`)
					require.Equal(t, "22023", sqlState(t, err), "%s = %s", setting, v)
					require.ErrorContains(t, err, setting)
				}
				e.exec(`SELECT mneme.set_setting($1, $2::jsonb)`, setting, before)
			}
			_, err := db.Pool.Exec(ctx, `SELECT * FROM mneme.cleanup(NULL)`)
			require.Equal(t, "22004", sqlState(t, err))
			// The phases refuse what the orchestrator would never pass them.
			for _, q := range []string{
				`SELECT mneme._cleanup_inactivate(NULL, false, 0.5)`,
				`SELECT mneme._cleanup_inactivate(now() + interval '5 years', false, NULL)`,
				`SELECT mneme._cleanup_expire(now(), NULL, 'cleanup')`,
				`SELECT mneme._cleanup_expire(now(), false, NULL)`,
				`SELECT mneme._cleanup_purge(NULL, false, 1)`,
				`SELECT mneme._cleanup_prune_jobs(now(), NULL, '1 day')`,
			} {
				_, err = db.Pool.Exec(ctx, q)
				require.Equal(t, "22004", sqlState(t, err), q)
			}
			st, _ := e.status(id)
			require.Equal(t, "active", st, "no failed cleanup changed anything")
			require.Equal(t, []string{"created"}, e.events(id))

			_, err = db.Pool.Exec(ctx, `SELECT mneme.set_setting('cleanup_interval', '"every day"')`)
			require.Equal(t, "22023", sqlState(t, err))
			forceSetting(t, db, "cleanup_interval", `"every day"`)
			_, err = db.Pool.Exec(ctx, `SELECT mneme.schedule_cleanup()`)
			require.Equal(t, "22023", sqlState(t, err))
			e.exec(`SELECT mneme.set_setting('cleanup_interval', '"1 day"')`)
			_, err = db.Pool.Exec(ctx, `SELECT mneme.schedule_cleanup('-1 hour')`)
			require.Equal(t, "22023", sqlState(t, err))
			var n int
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.jobs`).Scan(&n))
			require.Zero(t, n)

			// reactivate
			_, err = db.Pool.Exec(ctx, `SELECT mneme.reactivate(NULL)`)
			require.Equal(t, "22004", sqlState(t, err))
			_, err = db.Pool.Exec(ctx, `SELECT mneme.reactivate($1)`, uuid.New())
			require.Equal(t, "P0002", sqlState(t, err))
			e.exec(`SELECT mneme.forget($1, 'wrong')`, id)
			_, err = db.Pool.Exec(ctx, `SELECT mneme.reactivate($1)`, id)
			require.Equal(t, "55000", sqlState(t, err))
			st, _ = e.status(id)
			require.Equal(t, "invalidated", st)
		})
	}
}

// The sidecar's schedule: one pending cleanup job at a time (dedupe key),
// due cleanup_interval after the last one finished; none when the interval
// is null.
func TestScheduleCleanup(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			db := dbtest.New(t, dbtest.WithVector(variant))
			e := &lifeEnv{t: t, db: db}
			ctx := context.Background()
			var a, b int64
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.schedule_cleanup()`).Scan(&a))
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.schedule_cleanup('2 hours')`).Scan(&b))
			require.Equal(t, a, b, "one pending cleanup at a time")
			var due bool
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT run_at <= now() FROM mneme.jobs WHERE id = $1`, a).Scan(&due))
			require.True(t, due, "never ran: due now")
			e.exec(`UPDATE mneme.jobs SET state = 'done', finished_at = now() - interval '1 hour' WHERE id = $1`, a)
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.schedule_cleanup()`).Scan(&b))
			require.NotEqual(t, a, b)
			var wait time.Duration
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT extract(epoch FROM run_at - now())::float8 * 1e9 FROM mneme.jobs WHERE id = $1`, b).Scan(&wait))
			require.InDelta(t, float64(23*time.Hour), float64(wait), float64(time.Minute), "a day after the last finished")
			var kind string
			var key *string
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT kind, dedupe_key FROM mneme.jobs WHERE id = $1`, b).Scan(&kind, &key))
			require.Equal(t, "cleanup", kind)
			require.Equal(t, "cleanup", *key)

			e.exec(`DELETE FROM mneme.jobs`)
			e.exec(`SELECT mneme.set_setting('cleanup_interval', 'null')`)
			var none *int64
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.schedule_cleanup()`).Scan(&none))
			require.Nil(t, none)
		})
	}
}

// Reactivation: by hand, by a review, by a reconfirmation, by a pin; each
// recorded. Every lifecycle change is one event row, and the table is
// append-only.
func TestReactivateAndEvents(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			db := dbtest.New(t, dbtest.WithVector(variant))
			e := &lifeEnv{t: t, db: db, conv: uuid.New()}
			ctx := context.Background()
			old := time.Now().AddDate(-2, 0, 0)
			mk := func(s string) uuid.UUID {
				return addMemory(t, db, e.conv, s, map[string]any{"label": "trivial", "last_reviewed_at": old, "created_at": old})
			}
			byHand, byReview, byConfirm, byPin := mk("one"), mk("two"), mk("three"), mk("four")
			require.Equal(t, int64(4), e.cleanup(time.Now(), false)["inactivated"])

			var ok bool
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.reactivate($1)`, byHand).Scan(&ok))
			require.True(t, ok)
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.reactivate($1)`, byHand).Scan(&ok))
			require.False(t, ok, "active already")
			require.Equal(t, int64(0), e.cleanup(time.Now(), false)["inactivated"], "its curve restarted: not inactive again at once")

			var applied bool
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.apply_review($1, 'good', 5, 5, 'review', now(), 'heuristic')`, byReview).Scan(&applied))
			require.True(t, applied, "an inactive memory can be reviewed")
			e.exec(`UPDATE mneme.memories SET last_confirmed_at = now() WHERE id = $1`, byConfirm)
			e.exec(`SELECT mneme.pin($1)`, byPin)
			for _, id := range []uuid.UUID{byHand, byReview, byConfirm, byPin} {
				st, reason := e.status(id)
				require.Equal(t, "active", st)
				require.Empty(t, reason)
			}
			require.Equal(t, []string{"created", "inactivated", "reactivated"}, e.events(byHand))
			require.Equal(t, []string{"created", "inactivated", "reviewed", "reactivated"}, e.events(byReview))
			require.Equal(t, []string{"created", "inactivated", "reactivated"}, e.events(byConfirm))
			require.Equal(t, []string{"created", "inactivated", "pinned", "reactivated"}, e.events(byPin))
			reasons := func(id uuid.UUID) []string {
				var rs []string
				require.NoError(t, db.Pool.QueryRow(ctx, `SELECT array_agg(coalesce(reason, '') ORDER BY id) FROM mneme.memory_events
					WHERE memory_id = $1 AND event = 'reactivated'`, id).Scan(&rs))
				return rs
			}
			require.Equal(t, []string{"reactivated by hand"}, reasons(byHand))
			require.Equal(t, []string{"reviewed"}, reasons(byReview))
			require.Equal(t, []string{"reconfirmed"}, reasons(byConfirm))
			require.Equal(t, []string{"pinned"}, reasons(byPin))
			var logID, eventLogID int64
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT id FROM mneme.review_log WHERE memory_id = $1`, byReview).Scan(&logID))
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT review_log_id FROM mneme.memory_events WHERE memory_id = $1 AND event = 'reviewed'`, byReview).Scan(&eventLogID))
			require.Equal(t, logID, eventLogID)

			// The rest of the vocabulary: unpinned, forgotten, superseded.
			e.exec(`SELECT mneme.unpin($1)`, byPin)
			e.exec(`SELECT mneme.forget($1, 'the user said so')`, byHand)
			var newer uuid.UUID
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'two, corrected', 'general', supersedes => $2)`, e.conv, byReview).Scan(&newer))
			require.Equal(t, "unpinned", e.events(byPin)[4])
			require.Equal(t, "forgotten", e.events(byHand)[3])
			require.Equal(t, "superseded", e.events(byReview)[4])
			require.Equal(t, []string{"created"}, e.events(newer))
			var actor, reason string
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT actor, reason FROM mneme.memory_events WHERE memory_id = $1 AND event = 'forgotten'`, byHand).Scan(&actor, &reason))
			require.Equal(t, "the user said so", reason)
			require.NotEmpty(t, actor)
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT actor FROM mneme.memory_events WHERE memory_id = $1 AND event = 'inactivated'`, byHand).Scan(&actor))
			require.Equal(t, "cleanup", actor)

			// Append-only.
			for _, q := range []string{`UPDATE mneme.memory_events SET reason = 'x'`, `DELETE FROM mneme.memory_events`, `TRUNCATE mneme.memory_events`,
				`UPDATE mneme.memory_events SET reason = NULL`} {
				_, err := db.Pool.Exec(ctx, q)
				require.Equal(t, "55000", sqlState(t, err), q)
			}
		})
	}
}

// A review and a cleanup that race never leave a just-reviewed memory
// inactive: whichever takes the row lock first, the other sees its result.
func TestCleanupReviewRace(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			db := dbtest.New(t, dbtest.WithVector(variant))
			ctx := context.Background()
			conv := uuid.New()
			old := time.Now().AddDate(-2, 0, 0)

			// Order 1: the review holds the row; cleanup runs meanwhile and commits
			// first. It must not inactivate the row (skipped, or re-checked after).
			m1 := addMemory(t, db, conv, "race one", map[string]any{"label": "trivial", "last_reviewed_at": old, "created_at": old})
			rev, err := db.Pool.Begin(ctx)
			require.NoError(t, err)
			_, err = rev.Exec(ctx, `SELECT * FROM mneme.review_targets(ARRAY[$1]::uuid[], true)`, m1)
			require.NoError(t, err)
			var n int64
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count FROM mneme.cleanup() WHERE action = 'inactivated'`).Scan(&n))
			require.Zero(t, n, "the row under review is skipped")
			_, err = rev.Exec(ctx, `SELECT mneme.apply_review($1, 'good', 30, 5, 'review', now(), 'heuristic')`, m1)
			require.NoError(t, err)
			require.NoError(t, rev.Commit(ctx))
			e := &lifeEnv{t: t, db: db, conv: conv}
			st, _ := e.status(m1)
			require.Equal(t, "active", st)

			// Order 2: cleanup holds the row (inactivated, not committed); the
			// review waits for it, then finds it inactive and reactivates it.
			m2 := addMemory(t, db, conv, "race two", map[string]any{"label": "trivial", "last_reviewed_at": old, "created_at": old})
			cl, err := db.Pool.Begin(ctx)
			require.NoError(t, err)
			require.NoError(t, cl.QueryRow(ctx, `SELECT count FROM mneme.cleanup() WHERE action = 'inactivated'`).Scan(&n))
			require.Equal(t, int64(1), n)
			done := make(chan error, 1)
			go func() {
				_, err := db.Pool.Exec(ctx, `SELECT mneme.apply_review($1, 'good', 30, 5, 'review', now(), 'heuristic')`, m2)
				done <- err
			}()
			time.Sleep(200 * time.Millisecond) // the review is waiting for the row lock
			require.NoError(t, cl.Commit(ctx))
			require.NoError(t, <-done)
			st, _ = e.status(m2)
			require.Equal(t, "active", st)
			require.Equal(t, []string{"created", "inactivated", "reviewed", "reactivated"}, e.events(m2))

			// Many at once: every reviewed memory ends active.
			var ids []uuid.UUID
			for i := range 40 {
				ids = append(ids, addMemory(t, db, conv, fmt.Sprintf("race many %d", i), map[string]any{"label": "trivial", "last_reviewed_at": old, "created_at": old}))
			}
			var wg sync.WaitGroup
			errs := make(chan error, len(ids)+4)
			for i := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 5 {
						if _, err := db.Pool.Exec(ctx, `SELECT * FROM mneme.cleanup()`); err != nil {
							errs <- err
						}
					}
					_ = i
				}()
			}
			reviewed := ids[:20]
			for _, id := range reviewed {
				wg.Add(1)
				go func() {
					defer wg.Done()
					err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
						if _, err := tx.Exec(ctx, `SELECT * FROM mneme.review_targets(ARRAY[$1]::uuid[], true)`, id); err != nil {
							return err
						}
						_, err := tx.Exec(ctx, `SELECT mneme.apply_review($1, 'good', 30, 5, 'review', clock_timestamp(), 'heuristic')`, id)
						return err
					})
					if err != nil {
						errs <- err
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			var inactive int
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.memories WHERE id = ANY ($1) AND status <> 'active'`, reviewed).Scan(&inactive))
			require.Zero(t, inactive, "a reviewed memory is never left inactive")
		})
	}
}

// TestCleanupKindSaysWhatItDoes: the cleanup job kind's description (what
// `mneme jobs` and an operator read in mneme.job_kinds) names each action
// mneme.cleanup reports, and no step it does not have (it once promised an
// archive).
func TestCleanupKindSaysWhatItDoes(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	var desc string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT description FROM mneme.job_kinds WHERE kind = 'cleanup'`).Scan(&desc))
	rows, err := db.Pool.Query(ctx, `SELECT action FROM mneme.cleanup(true)`)
	require.NoError(t, err)
	actions, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	verb := map[string]string{"inactivated": "inactivate", "expired": "expired", "purged": "purge", "jobs_pruned": "prune done jobs"}
	require.Len(t, actions, len(verb))
	for _, a := range actions {
		require.Contains(t, verb, a, "an action the description does not know")
		require.Contains(t, desc, verb[a], "the description of action %s", a)
	}
	require.NotContains(t, desc, "archive")
}
