package tests

import (
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/cluster"
	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/daemon"
	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/migrate"
	"github.com/mneme-memory/mneme/sidecar/version"
)

// upgradeFrom is the previous release: tests/testdata/upgrade holds its
// database with data, one dump per vector variant, made by
// scripts/upgrade-snapshot.sh.
const upgradeFrom = "6e08fac"

// TestUpgradeFromPreviousRelease: the previous release's database with its
// data (docs/examples.sql run against it), migrated by this mneme, has the
// schema of a fresh install (tables, columns, indexes, views, functions,
// goose versions, setting keys) and keeps its data: the same messages,
// memories and events, and search finds what it found.
func TestUpgradeFromPreviousRelease(t *testing.T) {
	t.Parallel()
	if dbtest.OnCitus() {
		t.Skip("the snapshots are of one server")
	}
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			_, fresh := dbtest.NewEmpty(t)
			_, err := migrate.Run(ctx, fresh, migrate.Options{Vector: variant})
			require.NoError(t, err)

			_, url := dbtest.NewEmpty(t)
			restoreSnapshot(t, filepath.Join("testdata", "upgrade", upgradeFrom+"-"+variant+".sql.gz"), url)
			before := upgradeData(t, url)
			require.Contains(t, before, "Alice moved to Berlin", "the snapshot holds the examples' data")

			// The window, first half: a new sidecar started before the
			// migrate refuses the old schema, saying what to run.
			refuseOldSchema(t, url)

			res, err := migrate.Run(ctx, url, migrate.Options{Vector: variant})
			require.NoError(t, err)
			require.Equal(t, variant, res.Variant)

			onlyFresh, onlyUpgraded := lineDiff(upgradeSchema(t, fresh), upgradeSchema(t, url))
			require.Empty(t, onlyFresh, "a fresh install has these, the database upgraded from %s not", upgradeFrom)
			require.Empty(t, onlyUpgraded, "the database upgraded from %s has these, a fresh install not", upgradeFrom)
			require.Equal(t, before, upgradeData(t, url), "the data is kept")

			// The window, second half: the previous release's sidecar, still
			// running, does every kind of job against the new schema.
			oldSidecarRuns(t, url)

			// Rollback: the previous release's migrate re-applies its SQL
			// layer over the new schema (the new tables and columns stay) and
			// its sidecar works; migrating forward again restores this
			// release's functions and sidecar.
			rollBackAndForth(t, url, variant)
			onlyFresh, onlyUpgraded = lineDiff(upgradeSchema(t, fresh), upgradeSchema(t, url))
			require.Empty(t, onlyFresh, "after a rollback and forward again, a fresh install has these, the database not")
			require.Empty(t, onlyUpgraded, "after a rollback and forward again, the database has these, a fresh install not")
		})
	}
}

// restoreSnapshot feeds a gzipped pg_dump to psql (without the \restrict
// lines of newer pg_dumps, which older psqls do not know).
func restoreSnapshot(t *testing.T, path, url string) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err, "scripts/upgrade-snapshot.sh %s writes it", upgradeFrom)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	var dump strings.Builder
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if line := sc.Text(); !strings.HasPrefix(line, `\restrict `) && !strings.HasPrefix(line, `\unrestrict `) {
			dump.WriteString(line + "\n")
		}
	}
	require.NoError(t, sc.Err())
	bin, err := cluster.FindBinDir()
	require.NoError(t, err)
	cmd := exec.Command(filepath.Join(bin, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", "-", url)
	cmd.Stdin = strings.NewReader(dump.String())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "restore %s: %s", path, out)
}

// upgradeSchema is schemaFingerprint with the settings' keys but not their
// values: the data set some (docs/examples.sql's set_setting).
func upgradeSchema(t *testing.T, url string) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(schemaFingerprint(t, url), "\n") {
		if strings.HasPrefix(line, "setting ") {
			line, _, _ = strings.Cut(line, "=")
		}
		out = append(out, line)
	}
	return out
}

// lineDiff is the lines only a has and those only b has.
func lineDiff(a, b []string) (onlyA, onlyB []string) {
	inA, inB := map[string]bool{}, map[string]bool{}
	for _, l := range a {
		inA[l] = true
	}
	for _, l := range b {
		inB[l] = true
		if !inA[l] {
			onlyB = append(onlyB, l)
		}
	}
	for _, l := range a {
		if !inB[l] {
			onlyA = append(onlyA, l)
		}
	}
	return onlyA, onlyB
}

// upgradeData is what the data says: the messages, the memories (their
// status and content: a migration may move FSRS state, as 00042 did) and
// the events of every conversation, and what a search of the examples'
// conversation finds.
func upgradeData(t *testing.T, url string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var s string
	require.NoError(t, conn.QueryRow(ctx, `SELECT concat_ws(E'\n',
		(SELECT string_agg(format('message %s %s %s %s', conversation_id, id, role, content), E'\n' ORDER BY conversation_id, id) FROM mneme.messages),
		(SELECT string_agg(format('memory %s %s %s', id, status, coalesce(content, '')), E'\n' ORDER BY id) FROM mneme.memories),
		(SELECT string_agg(format('event %s %s %s', memory_id, event, reason), E'\n' ORDER BY id) FROM mneme.memory_events),
		(SELECT string_agg(content, E'\n' ORDER BY score DESC, memory_id)
		   FROM mneme.search('7f1c2f9e-0000-4000-8000-000000000001', 'where does Alice live', 5, at => '2030-01-01')))`).Scan(&s))
	return s
}

// refuseOldSchema: this release's sidecar against a database the previous
// release migrated (no mneme.version()) stops at start and says to migrate.
func refuseOldSchema(t *testing.T, url string) {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	cfg := config.Config{DatabaseURL: url, Events: "notify", Concurrency: 1, PollEvery: time.Hour, SlotName: "unused"}
	_, err = daemon.New(ctx, cfg, pool, slog.New(slog.DiscardHandler))
	require.ErrorIs(t, err, version.ErrIncompatible)
	require.ErrorContains(t, err, "the database has no mneme.version()")
	require.ErrorContains(t, err, "mneme migrate with this binary")
}

var oldSidecar struct {
	once sync.Once
	bin  string
	err  error
}

// previousSidecar builds the previous release's mneme from this
// repository's history (once per test binary).
func previousSidecar(t *testing.T) string {
	t.Helper()
	if err := exec.Command("git", "cat-file", "-e", upgradeFrom+"^{commit}").Run(); err != nil {
		t.Skipf("the previous release's sidecar is built from commit %s, which this checkout's history lacks (a shallow clone?)", upgradeFrom)
	}
	oldSidecar.once.Do(func() {
		dir, err := os.MkdirTemp("", "mneme-"+upgradeFrom+"-")
		if err != nil {
			oldSidecar.err = err
			return
		}
		script := fmt.Sprintf(`git -C .. archive %s | tar -x -C %q && cd %q && go build -o mneme ./sidecar`, upgradeFrom, dir, dir)
		if out, err := exec.Command("bash", "-c", script).CombinedOutput(); err != nil {
			oldSidecar.err = fmt.Errorf("build the %s sidecar: %v\n%s", upgradeFrom, err, out)
			return
		}
		oldSidecar.bin = filepath.Join(dir, "mneme")
	})
	require.NoError(t, oldSidecar.err)
	return oldSidecar.bin
}

// oldSidecarRuns: new work of every kind (segment, review, revise,
// cleanup) on the migrated database, drained by the previous release's
// sidecar: every job ends done.
func oldSidecarRuns(t *testing.T, url string) {
	t.Helper()
	bin := previousSidecar(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	conv := "7f1c2f9e-0000-4000-8000-00000000abcd"
	_, err = conn.Exec(ctx, strings.ReplaceAll(`
		SELECT mneme.add_message($1, r, c, '2026-03-01 10:00+00'::timestamptz + n * interval '1 minute')
		  FROM (VALUES (1, 'user', 'I started learning Rust this week.'), (2, 'assistant', 'Start with ownership.'),
		               (3, 'user', 'My sister lives in Porto.'), (4, 'assistant', 'Porto is lovely.'),
		               (5, 'user', 'She moved there last year.')) v(n, r, c);
		SELECT mneme.remember($1, 'Bob lives in Madrid', 'user_profile');
		SELECT count(*) FROM mneme.retrieve($1, 'Rust', 3);
		SELECT mneme.segment_now($1);
		SELECT mneme.schedule_cleanup(interval '0');`, "$1", "'"+conv+"'"))
	require.NoError(t, err)
	cmd := exec.Command(bin, "run", "--drain")
	cmd.Env = append(slicesWithout(os.Environ(), "DATABASE_URL="), "DATABASE_URL="+url, "MNEME_METRICS_ADDR=off", "MNEME_MAX_ATTEMPTS=1")
	out, err := cmd.CombinedOutput()
	// This release adds the job kind consolidate (issue 52): a sidecar of
	// the previous release started after the migrate refuses to run, as
	// its check of mneme.job_kinds says (docs/migrations.md); this
	// release's sidecar then does the work.
	require.Error(t, err, "the %s sidecar against the new schema:\n%s", upgradeFrom, out)
	require.Contains(t, string(out), "job kinds [consolidate] of mneme.job_kinds have no handler in this sidecar")
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	d, err := daemon.New(ctx, config.Config{DatabaseURL: url, Events: "poll", Concurrency: 1, PollEvery: time.Hour, SlotName: "unused",
		MaxAttempts: 1, JobLease: 30 * time.Second, ShutdownTimeout: time.Second}, pool, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.NoError(t, d.Runner.Drain(ctx))
	var kinds, notDone string
	require.NoError(t, conn.QueryRow(ctx, `SELECT string_agg(DISTINCT kind, ','),
		coalesce(string_agg(format('%s %s %s', kind, state, last_error), E'\n') FILTER (WHERE state <> 'done' AND NOT (kind = 'cleanup' AND state = 'pending' AND run_at > now())), '')
		FROM mneme.jobs`).Scan(&kinds, &notDone))
	require.Empty(t, notDone, "every job done by the %s sidecar (but the next cleanup, scheduled later):\n%s", upgradeFrom, out)
	for _, k := range []string{"segment", "review", "revise", "cleanup"} {
		require.Contains(t, kinds, k, "the new work reached a %s job", k)
	}
	var memories int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM mneme.memories WHERE conversation_id = $1`, conv).Scan(&memories))
	require.Positive(t, memories, "the new conversation has its memories")
}

// rollbackStatement is what docs/migrations.md says to run before the
// previous release's migrate when rolling back to it (TestMigrationsDoc
// checks that the doc says it): this release's functions whose result
// type the older migrate cannot replace, or whose added defaulted argument
// would make the older release's calls ambiguous.
const rollbackStatement = `DROP FUNCTION mneme.apply_revision(uuid, text, uuid, text, text, text, boolean, bigint);
DROP FUNCTION mneme.apply_review(uuid, text, float8, float8, text, timestamptz, text, text[], boolean, bigint, jsonb);
DROP FUNCTION mneme.memory_reviews(uuid);
DROP FUNCTION mneme._bm25_sums(uuid[], text[], float8[], float8, float8, float8, uuid[], timestamptz, timestamptz);`

// forwardAgainStatements is what docs/migrations.md says to run once
// before migrating forward again from the rolled-back release: what the
// old release's migrate made again that this release's goose migrations
// had dropped (they do not run twice).
const forwardAgainStatements = `DROP FUNCTION IF EXISTS mneme.apply_revision(uuid, text, uuid, text, text, text, boolean);
DROP FUNCTION IF EXISTS mneme.apply_review(uuid, text, float8, float8, text, timestamptz, text, text[], boolean, bigint);
DROP FUNCTION IF EXISTS mneme.memory_reviews(uuid);
DROP FUNCTION IF EXISTS mneme._functions_reaching(text);
DROP FUNCTION IF EXISTS mneme._shard_local_trg();
DROP FUNCTION IF EXISTS mneme._search_candidates(uuid[], text, real[], int, timestamptz, timestamptz, timestamptz, boolean);
DROP FUNCTION IF EXISTS mneme._claim_jobs_distributed(text, int, interval, int);
DROP FUNCTION IF EXISTS mneme._bm25_sums(uuid[], text[], float8[], float8, float8, float8, uuid[], timestamptz, timestamptz);
DROP FUNCTION IF EXISTS mneme._context_anchors(uuid, text, real[], timestamptz, timestamptz, timestamptz, text, uuid[]);
DROP FUNCTION IF EXISTS mneme._context_item(int, uuid, text, text, float8, timestamptz, bigint[], int, uuid[]);`

// rollBackAndForth: the previous release's `mneme migrate` on the migrated
// database, its sidecar draining new work, then this release's migrate
// and sidecar again.
func rollBackAndForth(t *testing.T, url, variant string) {
	t.Helper()
	bin := previousSidecar(t)
	ctx := context.Background()
	env := append(slicesWithout(os.Environ(), "DATABASE_URL="), "DATABASE_URL="+url, "MNEME_METRICS_ADDR=off", "MNEME_MAX_ATTEMPTS=1")
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	// docs/migrations.md, "Rolling back": first the functions the older
	// migrate cannot replace or would leave ambiguous go.
	_, err = conn.Exec(ctx, rollbackStatement)
	require.NoError(t, err)
	out, err := (&exec.Cmd{Path: bin, Args: []string{bin, "migrate"}, Env: env}).CombinedOutput()
	require.NoError(t, err, "the %s migrate over this release's schema:\n%s", upgradeFrom, out)
	work := func() {
		t.Helper()
		_, err := conn.Exec(ctx, `SELECT mneme.remember('7f1c2f9e-0000-4000-8000-00000000abce', 'Carol lives in Oslo', 'user_profile')`)
		require.NoError(t, err)
	}
	work()
	out, err = (&exec.Cmd{Path: bin, Args: []string{bin, "run", "--drain"}, Env: env}).CombinedOutput()
	require.NoError(t, err, string(out))
	failed := func() string {
		var s string
		require.NoError(t, conn.QueryRow(ctx, `SELECT coalesce(string_agg(format('%s %s', kind, last_error), E'\n'), '')
			FROM mneme.jobs WHERE state = 'failed'`).Scan(&s))
		return s
	}
	require.Empty(t, failed(), "rolled back: the %s sidecar fails no job", upgradeFrom)

	_, err = conn.Exec(ctx, forwardAgainStatements)
	require.NoError(t, err)
	_, err = migrate.Run(ctx, url, migrate.Options{Vector: variant})
	require.NoError(t, err)
	work()
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	d, err := daemon.New(ctx, config.Config{DatabaseURL: url, Events: "poll", Concurrency: 1, PollEvery: time.Hour, SlotName: "unused",
		MaxAttempts: 1, JobLease: 30 * time.Second, ShutdownTimeout: time.Second}, pool, slog.New(slog.DiscardHandler))
	require.NoError(t, err, "forward again: this release's sidecar starts")
	require.NoError(t, d.Runner.Drain(ctx))
	require.Empty(t, failed(), "forward again: this release's sidecar fails no job")
}

// TestMigrationsDoc: docs/migrations.md's rollback names the statement
// TestUpgradeFromPreviousRelease runs, and the release it rolls back to.
func TestMigrationsDoc(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "migrations.md"))
	require.NoError(t, err)
	doc := string(b)
	require.Contains(t, doc, rollbackStatement)
	require.Contains(t, doc, forwardAgainStatements)
	require.Contains(t, doc, "back to "+upgradeFrom)
	require.Contains(t, doc, "previous release's sidecar ("+upgradeFrom+")")
}
