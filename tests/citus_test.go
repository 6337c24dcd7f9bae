package tests

import (
	"bytes"
	"context"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/daemon"
	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/migrate"
	"github.com/mneme-memory/mneme/sidecar/pipeline"
	"github.com/mneme-memory/mneme/sidecar/scratch"
)

// TestMigrateOnCitusSaysTablesStayLocal: on a Citus coordinator
// (MNEME_TEST_CITUS_URL, a database with the citus extension; never set in
// make test) migrate succeeds, reports the extension and warns that
// nothing is distributed; mneme's tables stay local to the coordinator and
// the API works there as on one server (docs/scale.md).
func TestMigrateOnCitusSaysTablesStayLocal(t *testing.T) {
	ctx := context.Background()
	url, conn := citusDatabase(t)

	var logged bytes.Buffer
	res, err := migrate.Run(ctx, url, migrate.Options{Vector: "array", Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	require.NoError(t, err)
	require.NotEmpty(t, res.Citus)
	require.False(t, res.Distributed)
	require.Contains(t, logged.String(), "nothing is distributed")
	var distributed int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_dist_partition WHERE logicalrelid::regclass::text LIKE 'mneme.%'`).Scan(&distributed))
	require.Zero(t, distributed, "mneme's tables stay local to the coordinator")

	conv := uuid.New()
	_, err = conn.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'I live in Lisbon and I work at a bakery.')`, conv)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `SELECT mneme.remember($1, 'The user lives in Lisbon.')`, conv)
	require.NoError(t, err)
	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM mneme.search($1, 'where does the user live', 5)`, conv).Scan(&n))
	require.Equal(t, 1, n)
}

// TestMigrateCitusDistributes: `mneme migrate --citus` on a Citus
// coordinator distributes every table by conversation (or makes it a
// reference table), and the calls that name a conversation work on it:
// writes through the row triggers (BM25 statistics, events), both legs of
// search, the context, the job queue (a cleanup job, which has no
// conversation, included); tenants other than the default are refused. A
// second migrate keeps it distributed. What does not work yet is listed in
// docs/scale.md.
func TestMigrateCitusDistributes(t *testing.T) {
	ctx := context.Background()
	url, conn := citusDatabase(t)

	_, err := migrate.Run(ctx, url, migrate.Options{Vector: "array", Citus: true})
	require.NoError(t, err)
	res, err := migrate.Run(ctx, url, migrate.Options{Vector: "array"})
	require.NoError(t, err, "a second migrate of a distributed database")
	require.True(t, res.Distributed)

	rows, err := conn.Query(ctx, `SELECT c.relname::text FROM pg_class c
		WHERE c.relnamespace = 'mneme'::regnamespace AND c.relkind = 'r'
		  AND c.oid NOT IN (SELECT logicalrelid FROM pg_dist_partition) ORDER BY 1`)
	require.NoError(t, err)
	local, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	// (mneme.call_marks stays local, unused: on Citus marks are settings)
	require.Equal(t, []string{"call_marks"}, local, "every table distributed or reference")
	var colocated int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(DISTINCT colocationid) FROM pg_dist_partition
		WHERE partmethod = 'h' AND logicalrelid::regclass::text LIKE 'mneme.%'`).Scan(&colocated))
	require.Equal(t, 1, colocated, "the distributed tables are colocated")
	var statementTriggers int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_trigger
		WHERE tgrelid IN ('mneme.memories'::regclass, 'mneme.review_log'::regclass) AND NOT tgisinternal
		  AND (tgtype & 1) = 0 AND tgname NOT LIKE '%truncate%'`).Scan(&statementTriggers))
	require.Zero(t, statementTriggers, "row triggers only: a statement trigger with transition tables does not run on a shard")

	conv := uuid.New()
	_, err = conn.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'I live in Lisbon and I work at a bakery.')`, conv)
	require.NoError(t, err)
	var id uuid.UUID
	require.NoError(t, conn.QueryRow(ctx, `SELECT mneme.remember($1, 'The user lives in Lisbon.')`, conv).Scan(&id))
	_, err = conn.Exec(ctx, `SELECT mneme.remember($1, 'The user owns a small red bicycle.')`, conv)
	require.NoError(t, err)

	// No per-shard copies of functions (the triggers' functions write the
	// shards by name through mneme._shard, sql/000-core.sql), and the
	// helpers they call are mneme_owner's and no login's to call (a new
	// function is PUBLIC's).
	var copies, helpers, open int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE p.proname ~ '_[0-9]{4,}$'),
			count(*) FILTER (WHERE p.proname IN ('_shard', '_bm25_apply_shard')),
			count(*) FILTER (WHERE p.proname IN ('_shard', '_bm25_apply_shard') AND (pg_get_userbyid(p.proowner) <> 'mneme_owner'
				OR has_function_privilege('mneme_app', p.oid, 'EXECUTE') OR has_function_privilege('mneme_worker', p.oid, 'EXECUTE')
				OR has_function_privilege('mneme_admin', p.oid, 'EXECUTE')))
		FROM pg_proc p WHERE p.pronamespace = 'mneme'::regnamespace`).Scan(&copies, &helpers, &open))
	require.Zero(t, copies, "per-shard copies of functions")
	require.Equal(t, 2, helpers)
	require.Zero(t, open, "Citus helpers a login may call, or not owned by mneme_owner")

	// The array variant's <=> exists on the workers too (Citus does not
	// propagate CREATE OPERATOR): a bare vector lookup over the shards.
	var nearest uuid.UUID
	require.NoError(t, conn.QueryRow(ctx, `SELECT id FROM mneme.memories WHERE conversation_id = $1
		ORDER BY embedding OPERATOR(mneme.<=>) mneme.hash_embed('lives in Lisbon')::real[] LIMIT 1`, conv).Scan(&nearest))
	require.Equal(t, id, nearest)
	var bare int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM (SELECT id FROM mneme.memories
		ORDER BY embedding OPERATOR(mneme.<=>) mneme.hash_embed('bicycle')::real[] LIMIT 10) x`).Scan(&bare))
	require.Equal(t, 2, bare)

	// SELECT mneme.search(...) alone is delegated to the conversation's
	// worker: Citus says so at DEBUG1.
	nconn, notices := noticeConn(t, url)
	_, err = nconn.Exec(ctx, `SET client_min_messages = debug1`)
	require.NoError(t, err)
	for _, q := range []string{`SELECT mneme.search($1, 'where does the user live', 1)`, `SELECT mneme.context_items($1, 'where does the user live', 50)`,
		`SELECT mneme.retrieve($1, 'where does the user live', 1)`, `SELECT mneme.context($1, 'where does the user live', 50)`} {
		*notices = nil
		var record string
		require.NoError(t, nconn.QueryRow(ctx, q, pgx.QueryExecModeSimpleProtocol, conv).Scan(&record))
		require.Contains(t, *notices, "pushing down the function call", q)
		if strings.Contains(q, "search") || strings.Contains(q, "retrieve") {
			require.Contains(t, record, id.String())
		}
		// The same with the conversation bound as a parameter (the extended
		// protocol, a prepared statement: what drivers send by default).
		*notices = nil
		_, err := nconn.Exec(ctx, q, conv)
		require.NoError(t, err)
		require.Contains(t, *notices, "pushing down the function call", q+", bound parameter")
	}
	// The delegated retrieve and context recorded their pending reviews.
	var pending int
	require.NoError(t, conn.QueryRow(ctx, `SELECT jsonb_array_length(pending_reviews) FROM mneme.message_queue WHERE id = $1`, conv).Scan(&pending))
	require.Equal(t, 4, pending, "retrieve and context, delegated (twice each: literal and bound), recorded their reviews")
	var bm25Rank *int
	var got uuid.UUID
	require.NoError(t, conn.QueryRow(ctx, `SELECT memory_id, bm25_rank FROM mneme.search($1, 'where does the user live', 1)`, conv).
		Scan(&got, &bm25Rank))
	require.Equal(t, id, got)
	require.NotNil(t, bm25Rank, "the BM25 leg finds it (its statistics kept by the row trigger)")
	require.Equal(t, 1, *bm25Rank)
	var df int
	require.NoError(t, conn.QueryRow(ctx, `SELECT df FROM mneme.bm25_terms WHERE conversation_id = $1 AND term = 'user'`, conv).Scan(&df))
	require.Equal(t, 2, df)
	var text string
	require.NoError(t, conn.QueryRow(ctx, `SELECT mneme.context($1, 'where does the user live', 50)`, conv).Scan(&text))
	require.Contains(t, text, "Lisbon")
	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM mneme.retrieve($1, 'bicycle', 1)`, conv).Scan(&n))
	require.Equal(t, 1, n)

	rows, err = conn.Query(ctx, `SELECT event FROM mneme.memory_events WHERE conversation_id = $1 ORDER BY id`, conv)
	require.NoError(t, err)
	events, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"created", "created"}, events)

	var cleanup int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT mneme.schedule_cleanup()`).Scan(&cleanup))
	var jobConv uuid.UUID
	require.NoError(t, conn.QueryRow(ctx, `SELECT conversation_id FROM mneme.jobs WHERE id = $1`, cleanup).Scan(&jobConv))
	require.Equal(t, uuid.Nil, jobConv, "a job of no conversation goes to the nil conversation")
}

// citusDatabase creates a scratch database with the citus extension on the
// coordinator of MNEME_TEST_CITUS_URL and on each of its workers
// (scratch.Options.Citus), not migrated, and a connection to it; it skips
// the test when MNEME_TEST_CITUS_URL is not set.
func citusDatabase(t *testing.T) (string, *pgx.Conn) {
	t.Helper()
	base := dbtest.CitusURL(t)
	ctx := context.Background()
	db, err := scratch.Create(ctx, scratch.Options{Server: base, Prefix: "mneme_citus_", Citus: true})
	require.NoError(t, err)
	t.Cleanup(db.Close)
	conn, err := pgx.Connect(ctx, db.URL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return db.URL, conn
}

// citusMigrated is citusDatabase migrated with --citus, and a pool on it.
func citusMigrated(t *testing.T) (string, *pgx.Conn, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	url, conn := citusDatabase(t)
	_, err := migrate.Run(ctx, url, migrate.Options{Vector: "array", Citus: true})
	require.NoError(t, err)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return url, conn, pool
}

// TestMigrateCitusWithoutCitusFails: `mneme migrate --citus` on a database
// without the citus extension says what is missing and changes nothing.
func TestMigrateCitusWithoutCitusFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, url := dbtest.NewEmpty(t)
	_, err := migrate.Run(ctx, url, migrate.Options{Vector: "array"})
	require.NoError(t, err)
	before := schemaFingerprint(t, url)
	res, err := migrate.Run(ctx, url, migrate.Options{Vector: "array", Citus: true})
	require.ErrorContains(t, err, "--citus: the citus extension is not installed in this database")
	require.False(t, res.Distributed)
	require.Equal(t, before, schemaFingerprint(t, url), "a refused --citus changes nothing")
}

// TestCitusPipelineAndCallsByID: on a distributed database the sidecar's
// job runner (the real one, with the offline pipelines) claims and runs
// segmentation, revision and review; a transaction that writes two
// conversations on two workers commits (two-phase commit, the AFTER row
// triggers writing their shards directly); and the calls that name a
// memory by its id go to its shard.
func TestCitusPipelineAndCallsByID(t *testing.T) {
	ctx := context.Background()
	_, conn, pool := citusMigrated(t)
	var err error

	// Two conversations whose shards are on two different workers.
	var convs []uuid.UUID
	nodes := map[string]bool{}
	for len(convs) < 2 {
		c := uuid.New()
		var node string
		require.NoError(t, conn.QueryRow(ctx, `SELECT p.nodename || ':' || p.nodeport FROM pg_dist_shard_placement p
			WHERE p.shardid = get_shard_id_for_distribution_column('mneme.memories', $1::uuid)`, c).Scan(&node))
		if !nodes[node] {
			nodes[node] = true
			convs = append(convs, c)
		}
	}

	// One transaction, two workers: committed in two phases.
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	for _, c := range convs {
		_, err = tx.Exec(ctx, `SELECT mneme.remember($1, 'The user keeps bees on the roof.')`, c)
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit(ctx))
	var docs, created int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM mneme.bm25_docs WHERE conversation_id = ANY ($1)`, convs).Scan(&docs))
	require.Equal(t, 2, docs, "the BM25 statistics of both, written on their shards")
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM mneme.memory_events WHERE conversation_id = ANY ($1) AND event = 'created'`,
		convs).Scan(&created))
	require.Equal(t, 2, created)

	// Conversations through the sidecar's pipelines, with a retrieval the
	// review then rates.
	base := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	lines := []string{
		"I moved to Lisbon last spring and I love the light here.",
		"Lisbon light is famous among painters.",
		"My sister Ana visits me in Lisbon every August.",
		"That sounds like a lovely tradition with Ana.",
	}
	for _, c := range convs {
		for i, l := range lines {
			role := []string{"user", "assistant"}[i%2]
			_, err := pool.Exec(ctx, `SELECT mneme.add_message($1, $2, $3, $4)`, c, role, l, base.Add(time.Duration(i)*time.Minute))
			require.NoError(t, err)
		}
		_, err := pool.Exec(ctx, `SELECT mneme.segment_now($1)`, c)
		require.NoError(t, err)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	deps := pipeline.Deps{Embedder: embed.NewHash(config.DefaultEmbedDim), Log: log}
	drain := func() { drainJobs(t, pool, deps, log) }
	drain()
	var failed int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM mneme.jobs WHERE state = 'failed'`).Scan(&failed))
	require.Zero(t, failed, "no job failed")
	var episode uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, `SELECT id FROM mneme.memories WHERE conversation_id = $1 AND kind = 'episodic' LIMIT 1`,
		convs[0]).Scan(&episode))
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM mneme.retrieve($1, 'sister Ana visits Lisbon', 3, at => $2)`,
		convs[0], base.Add(time.Hour)).Scan(&n))
	require.Positive(t, n)
	_, err = pool.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'Ana arrives in Lisbon next week, I will show her the light.', $2)`,
		convs[0], base.Add(2*time.Hour))
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `SELECT mneme.segment_now($1)`, convs[0])
	require.NoError(t, err)
	drain()
	var reviews int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM mneme.review_log WHERE conversation_id = $1`, convs[0]).Scan(&reviews))
	require.Positive(t, reviews, "the retrieval was reviewed")
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM mneme.memory_events WHERE conversation_id = $1 AND event = 'reviewed'`,
		convs[0]).Scan(&n))
	require.Equal(t, reviews, n, "a reviewed event per rating, written on the shard")

	// A lease that expired on its last attempt fails the job (the claim's
	// routed UPDATE), as on one server.
	var jobID int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT id FROM mneme.jobs WHERE conversation_id = $1 ORDER BY id DESC LIMIT 1`, convs[1]).Scan(&jobID))
	_, err = pool.Exec(ctx, `UPDATE mneme.jobs SET state = 'running', attempts = 1, locked_by = 'gone',
		locked_until = now() - interval '1 second' WHERE conversation_id = $1 AND id = $2`, convs[1], jobID)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `SELECT count(*) FROM mneme.claim_jobs('w', 5, '1 minute', 1)`)
	require.NoError(t, err)
	var lastError string
	require.NoError(t, pool.QueryRow(ctx, `SELECT state || ': ' || last_error FROM mneme.jobs WHERE id = $1`, jobID).Scan(&lastError))
	require.Contains(t, lastError, "failed: lease expired on attempt 1 of 1 (worker gone crashed or timed out)")

	// Calls by memory id.
	_, err = pool.Exec(ctx, `SELECT mneme.pin($1)`, episode)
	require.NoError(t, err)
	var pinned bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT pinned FROM mneme.memories WHERE id = $1`, episode).Scan(&pinned))
	require.True(t, pinned)
	_, err = pool.Exec(ctx, `SELECT mneme.unpin($1)`, episode)
	require.NoError(t, err)
	var fact uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, `SELECT mneme.remember($1, 'The user keeps three hives.')`, convs[1]).Scan(&fact))
	_, err = pool.Exec(ctx, `SELECT mneme.forget($1, 'the user sold the hives')`, fact)
	require.NoError(t, err)
	var status string
	require.NoError(t, pool.QueryRow(ctx, `SELECT status FROM mneme.memories WHERE id = $1`, fact).Scan(&status))
	require.Equal(t, "invalidated", status)
	_, err = pool.Exec(ctx, `SELECT mneme.pin($1)`, uuid.New())
	require.ErrorContains(t, err, "does not exist")
	_, err = pool.Exec(ctx, `SELECT mneme.erase($1, 'the user asked')`, episode)
	require.NoError(t, err)
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM mneme.memories WHERE id = $1`, episode).Scan(&n))
	require.Zero(t, n, "erased")
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM mneme.bm25_docs WHERE memory_id = $1`, episode).Scan(&n))
	require.Zero(t, n, "and out of the BM25 statistics")
}

// TestCitusContextReadsOneShard: on Citus a context for one conversation,
// run on the coordinator (inside a transaction block, so not delegated),
// sends every statement to that conversation's shards only: its reads of
// turns and memories by id name the conversation too (sql/140-context.sql).
// Counted with citus.log_remote_commands: every shard a command names is
// the conversation's shard of its table, or a reference table's.
func TestCitusContextReadsOneShard(t *testing.T) {
	ctx := context.Background()
	url, conn := citusDatabase(t)
	_, err := migrate.Run(ctx, url, migrate.Options{Vector: "array", Citus: true})
	require.NoError(t, err)

	conv, other := uuid.New(), uuid.New()
	for _, c := range []uuid.UUID{conv, other} {
		for e := 0; e < 3; e++ {
			var ids []int64
			for _, text := range []string{"I adopted a puppy named Biscuit last week.", "Biscuit loves the beach near Lisbon."} {
				var id int64
				require.NoError(t, conn.QueryRow(ctx, `SELECT mneme.add_message($1, 'user', $2)`, c, text).Scan(&id))
				ids = append(ids, id)
			}
			_, err = conn.Exec(ctx, `SELECT mneme.create_episode($1, $2, 'Biscuit the puppy and the beach', 'episode',
				mneme.hash_embed('Biscuit the puppy'), 0, 'general', false, 900, 5)`, c, ids)
			require.NoError(t, err)
		}
		_, err = conn.Exec(ctx, `SELECT mneme.remember($1, 'The user has a puppy named Biscuit.')`, c)
		require.NoError(t, err)
	}

	allowed := map[string]bool{}
	rows, err := conn.Query(ctx, `
		SELECT d.shardid::text FROM pg_dist_shard d JOIN pg_dist_partition p USING (logicalrelid)
		 WHERE p.logicalrelid::regclass::text LIKE 'mneme.%'
		   AND (p.partmethod = 'n' OR d.shardid = get_shard_id_for_distribution_column(p.logicalrelid, $1::text))`, conv)
	require.NoError(t, err)
	shards, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	for _, s := range shards {
		allowed[s] = true
	}

	nconn, notices := noticeConn(t, url)
	tx, err := nconn.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SET LOCAL citus.log_remote_commands = on`)
	require.NoError(t, err)
	var items int
	var text string
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*), string_agg(text, ' ') FROM mneme.context_items($1, 'where does Biscuit the puppy play', 200)`, conv).
		Scan(&items, &text))
	require.Positive(t, items)
	require.Contains(t, text, "Biscuit")
	require.NotEmpty(t, *notices, "the context's statements ran on the workers")
	shardRe := regexp.MustCompile(`mneme\.[a-z_0-9]+?_([0-9]{6,})\b`)
	for _, n := range *notices {
		for _, m := range shardRe.FindAllStringSubmatch(n, -1) {
			require.True(t, allowed[m[1]], "a statement of the context went to shard %s, not the conversation's: %s", m[1], n)
		}
	}
}

// TestCitusCleanup: mneme.cleanup on Citus (its FOR UPDATE SKIP LOCKED
// reads conversation by conversation, each on its shard): memories whose
// retrievability fell below the threshold become inactive with their
// reason, an expired memory gets its one expired event, and with
// purge_after_days the inactive ones are purged; a second run finds
// nothing. The events, written on the workers, record the cleanup's actor
// and the time it ran for.
func TestCitusCleanup(t *testing.T) {
	ctx := context.Background()
	url, conn := citusDatabase(t)
	_, err := migrate.Run(ctx, url, migrate.Options{Vector: "array", Citus: true})
	require.NoError(t, err)
	var expiring uuid.UUID
	for _, c := range []uuid.UUID{uuid.New(), uuid.New(), uuid.New()} {
		for _, text := range []string{"The user lives in Lisbon.", "The user owns a red bicycle."} {
			require.NoError(t, conn.QueryRow(ctx, `SELECT mneme.remember($1, $2)`, c, text).Scan(&expiring))
		}
	}
	// _cleanup at a later time, as the sidecar's cleanup would run it then:
	// internal, so entered first as the API's calls are
	counts := func(at string) map[string]int64 {
		t.Helper()
		var when time.Time
		require.NoError(t, conn.QueryRow(ctx, `SELECT now() + $1::interval`, at).Scan(&when))
		return runCleanup(t, conn, when, false, true)
	}
	// One memory pinned (never inactivated nor purged) whose validity has
	// passed: expired, kept.
	_, err = conn.Exec(ctx, `UPDATE mneme.memories SET pinned = true, valid_until = now() - interval '1 day' WHERE id = $1`, expiring)
	require.NoError(t, err)
	got := counts("60 years")
	require.Equal(t, int64(5), got["inactivated"], "%v", got)
	require.Equal(t, int64(1), got["expired"], "%v", got)
	var reason string
	require.NoError(t, conn.QueryRow(ctx, `SELECT status_reason FROM mneme.memories WHERE status = 'inactive' LIMIT 1`).Scan(&reason))
	require.Regexp(t, `^retrievability 0\.[0-9]{4} at [0-9-]+ [0-9:]+ UTC is below inactive_below_r 0\.5$`, reason)
	// The events, written on the workers, carry the cleanup's actor and the
	// time it ran for (forwarded by mneme._enter and mneme._set_local).
	var actor string
	var years float64
	require.NoError(t, conn.QueryRow(ctx, `SELECT actor, extract(epoch FROM at - now()) / 86400 / 365.25 FROM mneme.memory_events
		WHERE event = 'inactivated' LIMIT 1`).Scan(&actor, &years))
	require.Equal(t, "cleanup", actor)
	require.InDelta(t, 60, years, 0.1)
	_, err = conn.Exec(ctx, `SELECT mneme.set_setting('purge_after_days', '1')`)
	require.NoError(t, err)
	got = counts("61 years")
	require.Equal(t, int64(5), got["purged"], "%v", got)
	require.Zero(t, got["expired"], "%v", got)
	got = counts("61 years")
	require.Zero(t, got["inactivated"]+got["expired"]+got["purged"], "a second run: %v", got)
	var left int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM mneme.memories`).Scan(&left))
	require.Equal(t, 1, left, "the pinned, expired memory is kept")
}

// citusLogin creates a login role of group (mneme_app, mneme_worker) on the
// Citus cluster (Citus creates it on the workers too), dropped after the
// test, and returns its name and the database's URL for it.
func citusLogin(t *testing.T, conn *pgx.Conn, dbURL, group string) (string, string) {
	t.Helper()
	ctx := context.Background()
	role := strings.TrimPrefix(group, "mneme_") + "_" + strings.ReplaceAll(uuid.NewString()[:13], "-", "")
	_, err := conn.Exec(ctx, `CREATE ROLE `+role+` LOGIN IN ROLE `+group)
	require.NoError(t, err)
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), dbURL)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, role)
		_, _ = c.Exec(context.Background(), `DROP ROLE IF EXISTS `+role)
	})
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	u.User = url.User(role)
	return role, u.String()
}

// TestCitusTenants: on the cluster, tenants are kept apart as on one
// server. Two logins bound to two tenants each find their own memory and
// nothing of the other's, whether the call is delegated to the worker
// (SELECT mneme.search(...) alone: the worker's session is the caller's) or
// run on the coordinator (its statements reach the workers on connections
// of mneme_owner, which learn the caller from mneme._enter); a login that
// forges the forwarded settings gets nothing more; an unbound login acts
// for the tenant it sets; the sidecar's login sees both; the events made on
// the workers record the real caller; a write into the other tenant's
// conversation is refused.
func TestCitusTenants(t *testing.T) {
	ctx := context.Background()
	dbURL, conn := citusDatabase(t)
	_, err := migrate.Run(ctx, dbURL, migrate.Options{Vector: "array", Citus: true})
	require.NoError(t, err)
	for _, tn := range []string{"ta", "tb"} {
		_, err := conn.Exec(ctx, `SELECT mneme.create_tenant($1)`, tn)
		require.NoError(t, err)
	}
	loginA, urlA := citusLogin(t, conn, dbURL, "mneme_app")
	loginB, urlB := citusLogin(t, conn, dbURL, "mneme_app")
	_, urlFree := citusLogin(t, conn, dbURL, "mneme_app")
	_, urlSide := citusLogin(t, conn, dbURL, "mneme_worker")
	for login, tn := range map[string]string{loginA: "ta", loginB: "tb"} {
		_, err := conn.Exec(ctx, `SELECT mneme.bind_login($1, $2)`, login, tn)
		require.NoError(t, err)
	}
	as := func(u string) *pgx.Conn {
		c, err := pgx.Connect(ctx, u)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		return c
	}
	a, b, free, side := as(urlA), as(urlB), as(urlFree), as(urlSide)
	convA, convB := uuid.New(), uuid.New()
	secret := map[uuid.UUID]string{convA: "Ta's codeword is quillfeather.", convB: "Tb's codeword is marrowbone."}
	for c, who := range map[uuid.UUID]*pgx.Conn{convA: a, convB: b} {
		_, err := who.Exec(ctx, `SELECT mneme.remember($1, $2)`, c, secret[c])
		require.NoError(t, err)
	}

	// What a session finds in a conversation, by each form of call.
	found := func(c *pgx.Conn, conv uuid.UUID) map[string]string {
		out := map[string]string{}
		var s string
		// delegated: SELECT f(...) alone, simple protocol
		require.NoError(t, c.QueryRow(ctx, `SELECT coalesce((SELECT string_agg((x).content, ' ') FROM (SELECT mneme.search($1, 'codeword', 5) AS x) y), '')`,
			pgx.QueryExecModeSimpleProtocol, conv).Scan(&s))
		out["search in a subquery"] = s
		rows, err := c.Query(ctx, `SELECT mneme.search($1, 'codeword', 5)`, pgx.QueryExecModeSimpleProtocol, conv)
		require.NoError(t, err)
		recs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		out["search delegated"] = strings.Join(recs, " ")
		for name, q := range map[string]string{
			"search":        `SELECT coalesce(string_agg(content, ' '), '') FROM mneme.search($1, 'codeword', 5)`,
			"retrieve":      `SELECT coalesce(string_agg(content, ' '), '') FROM mneme.retrieve($1, 'codeword', 5)`,
			"context_items": `SELECT coalesce(string_agg(text, ' '), '') FROM mneme.context_items($1, 'codeword', 200)`,
			"history":       `SELECT coalesce(string_agg(m.content, ' '), '') FROM mneme.search($1, 'codeword', 5) s, mneme.history(s.memory_id) m`,
		} {
			require.NoError(t, c.QueryRow(ctx, q, conv).Scan(&s), name)
			out[name] = s
		}
		return out
	}
	for _, c := range []struct {
		name       string
		conn       *pgx.Conn
		own, other uuid.UUID
	}{{"a bound to ta", a, convA, convB}, {"b bound to tb", b, convB, convA}} {
		for call, got := range found(c.conn, c.own) {
			require.Contains(t, got, strings.Split(secret[c.own], " ")[3], "%s: %s of its own conversation", c.name, call)
		}
		for call, got := range found(c.conn, c.other) {
			require.NotContains(t, got, strings.Split(secret[c.other], " ")[3], "%s: %s of the other tenant's conversation", c.name, call)
		}
	}

	// Forged forwarded settings: the call sets them again; nothing more.
	var n int
	require.NoError(t, a.QueryRow(ctx, `SELECT (SELECT count(*) FROM mneme.search($1, 'codeword', 5))
		FROM (SELECT set_config('mneme.call_tenant', 'tb', true), set_config('mneme.caller_worker', 'on', true),
		             set_config('mneme.caller', 'mneme_owner', true)) x`, convB).Scan(&n))
	require.Zero(t, n, "settings forged with set_config")
	require.NoError(t, pgx.BeginFunc(ctx, a, func(tx pgx.Tx) error {
		for _, q := range []string{`SET LOCAL mneme.call_tenant = 'tb'`, `SET LOCAL mneme.caller_worker = 'on'`} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return tx.QueryRow(ctx, `SELECT count(*) FROM mneme.search($1, 'codeword', 5)`, convB).Scan(&n)
	}))
	require.Zero(t, n, "settings forged with SET LOCAL (which Citus forwards)")
	_, err = a.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'let me in')`, convB)
	require.Equal(t, "42501", sqlState(t, err), "a write into the other tenant's conversation")

	// An unbound login acts for the tenant it sets, in its transaction.
	require.NoError(t, pgx.BeginFunc(ctx, free, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT mneme.set_tenant('tb')`); err != nil {
			return err
		}
		var own, other int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM mneme.search($1, 'codeword', 5)`, convB).Scan(&own); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM mneme.search($1, 'codeword', 5)`, convA).Scan(&other); err != nil {
			return err
		}
		require.Equal(t, 1, own)
		require.Zero(t, other)
		return nil
	}))

	// The sidecar works for every tenant.
	for _, conv := range []uuid.UUID{convA, convB} {
		require.NoError(t, side.QueryRow(ctx, `SELECT count(*) FROM mneme.search($1, 'codeword', 5)`, conv).Scan(&n))
		require.Equal(t, 1, n)
		require.NoError(t, side.QueryRow(ctx, `SELECT count(*) FROM mneme.memories WHERE conversation_id = $1`, conv).Scan(&n))
		require.Equal(t, 1, n)
	}

	// The events, written by the row trigger on the worker, name the caller
	// and carry the conversation's tenant.
	for conv, want := range map[uuid.UUID][2]string{convA: {loginA, "ta"}, convB: {loginB, "tb"}} {
		var caller, tenant string
		require.NoError(t, conn.QueryRow(ctx, `SELECT caller, tenant_id FROM mneme.memory_events WHERE conversation_id = $1 AND event = 'created'`, conv).
			Scan(&caller, &tenant))
		require.Equal(t, want, [2]string{caller, tenant})
	}
}

// TestCitusNotifyTransport: the sidecar on the coordinator with the NOTIFY
// transport and a sweep too slow to matter (an hour) segments a
// conversation written through add_message and segment_now: the jobs are
// enqueued by calls that run on the coordinator (add_message is not
// delegated), so their NOTIFY reaches the sidecar's LISTEN there.
func TestCitusNotifyTransport(t *testing.T) {
	ctx := context.Background()
	url, conn, pool := citusMigrated(t)

	cfg := config.Config{DatabaseURL: url, Events: config.EventsNotify, Concurrency: 2, PollEvery: time.Hour,
		MaxAttempts: 5, JobLease: 30 * time.Second, LLMTimeout: 5 * time.Second, EmbedDim: config.DefaultEmbedDim}
	d, err := daemon.New(ctx, cfg, pool, slog.New(slog.NewTextHandler(testWriter{t}, nil)))
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Serve(runCtx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()

	// The sidecar listens (its listening session's last statement), and
	// has swept once: from now on only a NOTIFY wakes it within the hour.
	require.Eventually(t, func() bool {
		var n int
		_ = conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query ILIKE 'listen %mneme_jobs%'`).Scan(&n)
		return n > 0
	}, 30*time.Second, 50*time.Millisecond, "the sidecar LISTENs on the coordinator")
	time.Sleep(500 * time.Millisecond)

	conv := uuid.New()
	base := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	for i, l := range []string{"I keep bees on the roof of my building.", "How many hives do you have?",
		"Three hives, and the honey is dark this year.", "Dark honey often comes from chestnut trees."} {
		_, err := pool.Exec(ctx, `SELECT mneme.add_message($1, $2, $3, $4)`, conv, []string{"user", "assistant"}[i%2], l,
			base.Add(time.Duration(i)*time.Minute))
		require.NoError(t, err)
	}
	_, err = pool.Exec(ctx, `SELECT mneme.segment_now($1)`, conv)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var n int
		_ = conn.QueryRow(ctx, `SELECT count(*) FROM mneme.memories WHERE conversation_id = $1`, conv).Scan(&n)
		return n == 1
	}, 30*time.Second, 100*time.Millisecond, "segmented after the NOTIFY, long before the sweep")
}

// TestCitusReembedRefused: mneme reembed on a distributed mneme says it
// does not run there, and changes nothing (the dimension, the embeddings).
func TestCitusReembedRefused(t *testing.T) {
	ctx := context.Background()
	_, conn, _ := citusMigrated(t)
	conv := uuid.New()
	_, err := conn.Exec(ctx, `SELECT mneme.remember($1, 'The user keeps bees on the roof.')`, conv)
	require.NoError(t, err)
	state := func() string {
		var s string
		require.NoError(t, conn.QueryRow(ctx, `SELECT (SELECT value::text FROM mneme.settings WHERE key = 'embedding_dim') || '/' ||
			(SELECT value::text FROM mneme.settings WHERE key = 'embedder') || '/' ||
			(SELECT md5(string_agg(embedding::text, ',' ORDER BY id)) FROM mneme.memories)`).Scan(&s))
		return s
	}
	before := state()
	_, err = migrate.Reembed(ctx, conn, 64, nil)
	require.ErrorContains(t, err, "does not run on a distributed mneme (Citus)")
	require.Equal(t, before, state())
}

// Databases of one Citus cluster migrated at once: each migrate changes
// rows of catalogs every database shares (distribute.sql makes
// mneme_owner a login; the SQL layer grants the group roles), and two at
// the same moment failed one of them with "tuple concurrently updated"
// (XX000; the citus deployment's run of 2026-11-28, TestRetrieveRanking).
// The migrate runs such a step again (migrate.retryCatalog): every one
// succeeds.
func TestCitusMigratesSeveralDatabasesAtOnce(t *testing.T) {
	ctx := context.Background()
	const n = 4
	urls := make([]string, n)
	for i := range urls {
		urls[i], _ = citusDatabase(t)
	}
	errs := make(chan error, n)
	for _, u := range urls {
		go func(u string) {
			_, err := migrate.Run(ctx, u, migrate.Options{Vector: "array", Citus: true})
			errs <- err
		}(u)
	}
	for range urls {
		require.NoError(t, <-errs)
	}
}
