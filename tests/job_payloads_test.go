package tests

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// twoTenantsQueued: conversations of tenants acme and globex, each with a
// session and a message after a gap (so each has a segment job), written
// by the application; returns the conversations by tenant.
func twoTenantsQueued(t *testing.T, db *dbtest.DB) map[string]uuid.UUID {
	t.Helper()
	ctx := context.Background()
	app := appWithTenants(t, db, "acme", "globex")
	convs := map[string]uuid.UUID{"acme": uuid.New(), "globex": uuid.New()}
	for tenant, conv := range convs {
		require.NoError(t, inTenant(t, app, tenant, func(tx pgx.Tx) error {
			for i := range 6 {
				if _, err := tx.Exec(ctx, `SELECT mneme.add_message($1, 'user', $2, $3)`, conv,
					fmt.Sprintf("%s plans its garden, step %d of the plan", tenant, i), day1.Add(time.Duration(i)*time.Minute)); err != nil {
					return err
				}
			}
			_, err := tx.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'much later', $2)`, conv, day3)
			return err
		}))
	}
	return convs
}

// TestJobPayloadsMalformedEveryKind: for every job kind, payloads of the
// wrong type or out of range are refused at enqueue (22023, naming what the
// handler reads), as the sidecar's own login (mneme_worker), and nothing is
// written; the payloads (through_message_id 1.5, 1e300) among them.
func TestJobPayloadsMalformedEveryKind(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	convs := twoTenantsQueued(t, db)
	worker, _ := db.PoolAs(t, "mneme_worker")
	conv := convs["acme"]
	mid := uuid.NewString()
	const at = `"reviewed_at": "2026-01-01T00:00:00Z"`
	cases := []struct {
		kind, payload, hint string
	}{
		{"segment", `{"check": false, "through_message_id": 1.5}`, "through_message_id: integer id"},
		{"segment", `{"check": false, "through_message_id": 1e300}`, "through_message_id: integer id"},
		{"segment", `{"check": false, "through_message_id": 9223372036854775808}`, "9223372036854775807"},
		{"segment", `{"check": false, "through_message_id": 0}`, "through_message_id"},
		{"segment", `{"check": false, "through_message_id": -3}`, "through_message_id"},
		{"segment", `{"check": false, "through_message_id": "5"}`, "through_message_id"},
		{"segment", `{"check": false, "through_message_id": [5]}`, "through_message_id"},
		{"segment", `{"check": false, "through_message_id": null}`, "through_message_id"},
		{"segment", `{"check": false}`, "required when check is false"},
		{"segment", `{"check": "false", "through_message_id": 5}`, "$.check: boolean"},
		{"segment", `{"through_message_id": 5}`, "$.check: boolean"},
		{"segment", `{"check": true, "trigger_message_id": 2.5}`, "trigger_message_id"},
		{"segment", `{"check": true, "reason": 7}`, "$.reason: string"},
		{"segment", `{"check": true, "next_through_message_id": {}}`, "next_through_message_id"},
		{"review", `{"reviews": []}`, "reviewed_at: RFC 3339 time"},
		{"review", `{"reviews": [], "reviewed_at": "yesterday"}`, "reviewed_at: RFC 3339 time"},
		{"review", `{"reviews": [], "reviewed_at": 1767225600}`, "reviewed_at"},
		{"review", `{"reviews": [], "reviewed_at": "2026-02-30T00:00:00Z"}`, "reviewed_at"},
		{"review", `{"reviews": [], "reviewed_at": "0001-01-01T00:00:00Z"}`, "reviewed_at"},
		{"review", `{"reviews": {}, ` + at + `}`, "$.reviews: array"},
		{"review", `{"reviews": [[1]], ` + at + `}`, "$.reviews[*]: object"},
		{"review", `{"reviews": [{"query": 1, "memory_ids": []}], ` + at + `}`, "query: string"},
		{"review", `{"reviews": [{"query": "q", "memory_ids": "` + mid + `"}], ` + at + `}`, "memory_ids: array"},
		{"review", `{"reviews": [{"query": "q", "memory_ids": [7]}], ` + at + `}`, "memory_ids[*]: string"},
		{"review", `{"reviews": [], "context_message_ids": [1, 2.5], ` + at + `}`, "context_message_ids[*]: integer id"},
		{"review", `{"reviews": [], "context": [{"id": "x"}], ` + at + `}`, "context[*].id"},
		{"revise", `{"memory_id": "not-a-uuid"}`, "memory_id: uuid"},
		{"revise", `{"memory_id": 7}`, "memory_id: uuid"},
		{"revise", `{"memory_id": ["` + mid + `"]}`, "memory_id: uuid"},
		{"revise", `{"memory_id": "00000000-0000-0000-0000-000000000000"}`, "nil uuid"},
		{"revise", `{}`, "memory_id: uuid"},
		{"cleanup", `[]`, ""},
		{"cleanup", `"all"`, ""},
		{"noop", `5`, ""},
		{"consolidate", `[]`, ""},
		{"consolidate", `{"reason": 5}`, "reason: string"},
	}
	count := func() int {
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.jobs`).Scan(&n))
		return n
	}
	before := count()
	kinds := map[string]bool{}
	for _, c := range cases {
		kinds[c.kind] = true
		var c0 any = conv
		_, err := worker.Exec(ctx, `SELECT mneme.enqueue_job($1, $2, $3::jsonb)`, c.kind, c0, c.payload)
		require.Error(t, err, "%s %s was accepted", c.kind, c.payload)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "%s %s: %v", c.kind, c.payload, err)
		require.Equal(t, "22023", pgErr.Code, "%s %s: %v", c.kind, c.payload, err)
		if c.hint == "" {
			require.Contains(t, pgErr.Message, "must be a JSON object", "%s %s", c.kind, c.payload)
			continue
		}
		require.Contains(t, pgErr.Hint, c.hint, "%s %s: %s", c.kind, c.payload, pgErr.Message)
	}
	var all []string
	rows, err := db.Pool.Query(ctx, `SELECT kind FROM mneme.job_kinds ORDER BY kind`)
	require.NoError(t, err)
	all, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	for _, k := range all {
		require.True(t, kinds[k], "no malformed payload tried for kind %s", k)
	}
	require.Equal(t, before, count(), "nothing written")

	// The well-formed payloads of each kind still pass, as the worker.
	for _, c := range []struct{ kind, payload string }{
		{"segment", `{"check": false, "reason": "gap", "through_message_id": 1, "trigger_message_id": 9223372036854775807}`},
		{"review", `{"reviews": [{"query": "q", "memory_ids": ["` + mid + `"]}], "context_message_ids": [1, 2], "reviewed_at": "2026-01-01T00:00:00.123456789+02:00"}`},
		{"revise", `{"memory_id": "` + uuid.NewString() + `"}`},
		{"cleanup", `{}`},
		{"noop", `{"anything": [1, "x"]}`},
		{"consolidate", `{"reason": "on_demand"}`},
	} {
		_, err := worker.Exec(ctx, `SELECT mneme.enqueue_job($1, $2, $3::jsonb)`, c.kind, conv, c.payload)
		require.NoError(t, err, "%s %s", c.kind, c.payload)
	}
}

// TestBadJobRowStopsNoQueue: a segment job with a payload no rule lets in
// now (through_message_id 1.5, written before the rules checked ranges:
// inserted here directly) fails with its error, on the handler's path and
// on the claim's (lease expired on its last attempt), and every other
// tenant's jobs still run; the sidecar runs live, as mneme_worker.
func TestBadJobRowStopsNoQueue(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	convs := twoTenantsQueued(t, db)
	worker, workerURL := db.PoolAs(t, "mneme_worker")
	// The acme conversation's pending job gets the bad payload; a second
	// bad job of acme is running with its lease expired on its last attempt.
	_, err := db.Pool.Exec(ctx, `UPDATE mneme.jobs SET payload = '{"check": false, "through_message_id": 1.5}'
		WHERE conversation_id = $1 AND kind = 'segment'`, convs["acme"])
	require.NoError(t, err)
	var expired int64
	require.NoError(t, db.Pool.QueryRow(ctx, `INSERT INTO mneme.jobs (kind, conversation_id, payload, state, attempts, max_attempts,
		locked_by, locked_until) VALUES ('segment', $1, '{"check": false, "through_message_id": 1e300}', 'running', 3, 3,
		'crashed-worker', now() - interval '1 minute') RETURNING id`, convs["acme"]).Scan(&expired))

	// The claim never fails because of one row.
	claimAs := func(pool *pgxpool.Pool) {
		t.Helper()
		// (what it claims is given back at once)
		_, err := pool.Exec(ctx, `SELECT mneme.release_job(c.id, 'probe', c.attempts) FROM mneme.claim_jobs('probe', 1, '1 minute') c`)
		require.NoError(t, err)
	}
	claimAs(worker)
	var state, lastErr string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT state, coalesce(last_error, '') FROM mneme.jobs WHERE id = $1`, expired).Scan(&state, &lastErr))
	require.Equal(t, "failed", state, "the claim failed the job whose lease expired on its last attempt")
	require.Contains(t, lastErr, "lease expired on attempt 3 of 3")

	// The sidecar, live, as mneme_worker.
	s := startSidecar(t, workerURL, "")
	waitIdle(t, db.Pool)
	s.stop()
	claimAs(worker)
	e := &pipelineEnv{t: t, db: db}

	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT state, coalesce(last_error, '') FROM mneme.jobs
		WHERE conversation_id = $1 AND kind = 'segment' AND id <> $2 ORDER BY id LIMIT 1`, convs["acme"], expired).Scan(&state, &lastErr))
	require.Equal(t, "failed", state)
	require.Contains(t, lastErr, "payload")
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE state = 'running' OR (state = 'pending' AND run_at <= now())`),
		"no job stuck (the daily cleanup waits for its time)")
	require.Equal(t, 1, e.count(`SELECT count(*) FROM mneme.memories WHERE conversation_id = $1`, convs["globex"]),
		"the other tenant's segmentation ran")
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE conversation_id = $1 AND state <> 'done'`, convs["globex"]))
}

// TestClaimSurvivesAJobThatCannotFail: when failing one expired job throws
// (here a trigger of the test's own that refuses it), the claim still
// answers, fails the other expired jobs, and sets the one aside for an hour
// with the error kept; the sidecar's login (mneme_worker) claims.
func TestClaimSurvivesAJobThatCannotFail(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	worker, _ := db.PoolAs(t, "mneme_worker")
	var good, bad int64
	for _, id := range []*int64{&good, &bad} {
		require.NoError(t, db.Pool.QueryRow(ctx, `INSERT INTO mneme.jobs (kind, payload, state, attempts, max_attempts, locked_by,
			locked_until, tenant_id) VALUES ('noop', '{}', 'running', 2, 2, 'crashed', now() - interval '1 minute', 'default')
			RETURNING id`).Scan(id))
	}
	_, err := db.Pool.Exec(ctx, fmt.Sprintf(`
		CREATE FUNCTION public.refuse_failing() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.id = %d AND NEW.state = 'failed' THEN
				RAISE EXCEPTION 'this row refuses to fail';
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER refuse_failing BEFORE UPDATE ON mneme.jobs FOR EACH ROW EXECUTE FUNCTION public.refuse_failing();`, bad))
	require.NoError(t, err)
	rows, err := worker.Query(ctx, `SELECT id FROM mneme.claim_jobs('probe', 5, '1 minute')`)
	require.NoError(t, err)
	claimed, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err, "the claim answers")
	require.Empty(t, claimed)
	var state, lastErr string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT state, last_error FROM mneme.jobs WHERE id = $1`, good).Scan(&state, &lastErr))
	require.Equal(t, "failed", state)
	require.Contains(t, lastErr, "lease expired on attempt 2 of 2")
	var later bool
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT state, last_error, locked_until > now() + interval '50 minutes'
		FROM mneme.jobs WHERE id = $1`, bad).Scan(&state, &lastErr, &later))
	require.Equal(t, "running", state)
	require.True(t, later, "left out of claims for an hour")
	require.Contains(t, lastErr, "this row refuses to fail")
}

// TestJobPayloadRules: mneme.enqueue_job checks every job against its row of
// mneme.job_kinds (a conversation when the kind needs one, the payload
// rule), names what the handler reads in the hint, and writes nothing when
// it refuses; a review job without reviewed_at is refused at once instead
// of failing in the sidecar.
func TestJobPayloadRules(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	conv := uuid.New()
	_, err := db.Pool.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'hello there')`, conv)
	require.NoError(t, err)
	var kinds []string
	rows, err := db.Pool.Query(ctx, `SELECT kind FROM mneme.job_kinds ORDER BY kind`)
	require.NoError(t, err)
	kinds, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"cleanup", "consolidate", "noop", "review", "revise", "segment"}, kinds)

	count := func() int {
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.jobs`).Scan(&n))
		return n
	}
	before := count()
	for _, c := range []struct {
		kind    string
		conv    any
		payload string
		hint    string
	}{
		{"review", conv, `{"reviews": []}`, "reviewed_at"},
		{"review", conv, `{"reviews": {}, "reviewed_at": "2026-01-01T00:00:00Z"}`, "reviews"},
		{"review", nil, `{"reviews": [], "reviewed_at": "2026-01-01T00:00:00Z"}`, "a conversation"},
		{"segment", conv, `{"check": "yes"}`, "check"},
		{"segment", conv, `{"check": false}`, "through_message_id"},
		{"revise", conv, `{"memory_id": "not-a-uuid"}`, "memory_id"},
		{"revise", conv, `{"memory_id": 7}`, "memory_id"},
	} {
		_, err := db.Pool.Exec(ctx, `SELECT mneme.enqueue_job($1, $2, $3::jsonb)`, c.kind, c.conv, c.payload)
		require.Equal(t, "22023", sqlState(t, err), "%s %s", c.kind, c.payload)
		require.ErrorContains(t, err, "not what its handler reads")
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		require.Contains(t, pgErr.Hint, c.hint, "%s %s", c.kind, c.payload)
	}
	require.Equal(t, before, count(), "nothing written")
	for _, c := range []struct{ kind, payload string }{
		{"review", `{"reviews": [], "reviewed_at": "2026-01-01T00:00:00Z"}`},
		{"segment", `{"check": false, "through_message_id": 1}`},
		{"revise", `{"memory_id": "` + uuid.NewString() + `"}`},
	} {
		_, err := db.Pool.Exec(ctx, `SELECT mneme.enqueue_job($1, $2, $3::jsonb)`, c.kind, conv, c.payload)
		require.NoError(t, err, "%s %s", c.kind, c.payload)
	}
}
