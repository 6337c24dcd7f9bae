package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// citusGenerated is the checked-in file a migrate of a distributed mneme
// applies after the SQL layer: the Citus forms of the functions, made
// ahead of time by tests/testdata/citus_generate.sql.
const citusGenerated = "../sql/citus/100-generated.sql"

const citusGeneratedHeader = `-- =============================================================================
-- GENERATED: do not edit. The Citus forms of mneme's functions, made ahead
-- of time from the one-server functions of sql/*.sql by
-- tests/testdata/citus_generate.sql (which says what it changes and why);
-- rewrite this file after changing a function:
--     go test ./tests -run TestCitusGeneratedUpToDate -update
-- TestCitusGeneratedUpToDate fails while it is stale. Applied only on a
-- distributed mneme (mneme migrate --citus; docs/scale.md), after sql/*.sql,
-- replacing each function by name (CREATE OR REPLACE keeps its owner and
-- grants). @extschema@ is the vector extension's schema, as in sql/.
-- =============================================================================

`

// TestCitusGeneratedUpToDate: sql/citus/100-generated.sql is what the
// generator makes from the functions of sql/*.sql today, in both vector
// variants (one file serves both: the distance operator is written
// @extschema@ as in sql/). A changed function without a rewritten file
// fails here, not on a Citus cluster. -update rewrites the file.
func TestCitusGeneratedUpToDate(t *testing.T) {
	t.Parallel()
	if dbtest.OnCitus() {
		t.Skip("generated from a one-server mneme: runs in the array and pgvector deployments")
	}
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			db := dbtest.New(t, dbtest.WithVector(variant))
			got := citusGenerate(t, db.URL)
			if *update && variant == "array" {
				require.NoError(t, os.WriteFile(citusGenerated, []byte(got), 0o644))
				return
			}
			want, err := os.ReadFile(citusGenerated)
			require.NoError(t, err)
			require.Equal(t, string(want), got,
				"sql/citus/100-generated.sql is stale: go test ./tests -run TestCitusGeneratedUpToDate -update rewrites it")
		})
	}
}

// citusGenerate runs the generator on the migrated one-server database at
// url in a transaction it rolls back, and returns the file: every function
// whose definition the generator changed, in signature order.
func citusGenerate(t *testing.T, url string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	script, err := os.ReadFile(filepath.Join("testdata", "citus_generate.sql"))
	require.NoError(t, err)
	var extSchema string
	require.NoError(t, conn.QueryRow(ctx, `SELECT coalesce((SELECT n.nspname FROM pg_extension e
		JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'), 'mneme')`).Scan(&extSchema))

	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // always rolled back: the generator only reads what it made
	defs := func() map[string]string {
		rows, err := tx.Query(ctx, `SELECT p.oid::regprocedure::text, pg_catalog.pg_get_functiondef(p.oid)
			FROM pg_catalog.pg_proc p WHERE p.pronamespace = 'mneme'::regnamespace AND p.prokind = 'f'`)
		require.NoError(t, err)
		out := map[string]string{}
		for rows.Next() {
			var sig, def string
			require.NoError(t, rows.Scan(&sig, &def))
			out[sig] = def
		}
		require.NoError(t, rows.Err())
		return out
	}
	before := defs()
	_, err = tx.Exec(ctx, string(script))
	require.NoError(t, err)
	after := defs()
	var sigs []string
	for sig, def := range after {
		if before[sig] != def {
			sigs = append(sigs, sig)
		}
	}
	sort.Strings(sigs)
	require.NotEmpty(t, sigs, "the generator changed no function")
	var nested []string
	rows, err := tx.Query(ctx, `SELECT sig FROM citus_nested ORDER BY sig`)
	require.NoError(t, err)
	for rows.Next() {
		var sig string
		require.NoError(t, rows.Scan(&sig))
		nested = append(nested, sig)
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, nested)
	var b strings.Builder
	b.WriteString(citusGeneratedHeader)
	// migrate writes @extschema@ as the quoted schema name (applySQL)
	ext := pgx.Identifier{extSchema}.Sanitize() + "."
	for _, sig := range sigs {
		def := strings.ReplaceAll(after[sig], ext, "@extschema@.")
		b.WriteString(strings.TrimRight(def, "\n"))
		b.WriteString(";\n\n")
	}
	b.WriteString("-- Nested distributed execution allowed (after the definitions above, which\n" +
		"-- would reset it): tests/testdata/citus_generate.sql, step 5, says why.\n")
	for _, sig := range nested {
		fmt.Fprintf(&b, "ALTER FUNCTION %s SET citus.allow_nested_distributed_execution = on;\n", sig)
	}
	return b.String()
}

// TestSQLRewritesNoFunction: no file of the SQL layer makes a function
// from another's text at migrate time (issue 41): none reads a function's
// source or definition. sql/citus/100-generated.sql is made ahead of time.
func TestSQLRewritesNoFunction(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../sql/*.sql")
	require.NoError(t, err)
	layer, err := filepath.Glob("../sql/citus/*.sql")
	require.NoError(t, err)
	files = append(files, layer...)
	require.Greater(t, len(files), 20)
	for _, f := range files {
		body, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, banned := range []string{"pg_get_functiondef", "prosrc"} {
			require.False(t, strings.Contains(string(body), banned), "%s reads a function's text (%s)", f, banned)
		}
	}
}

// TestCitusRowTriggersWriteShards: on Citus the AFTER row triggers
// (sql/citus/300-triggers.sql) write the colocated shards by name: the
// BM25 statistics they keep through inserts, a content change and a
// forget equal a rebuild from the memories; the lifecycle events (created,
// pinned, forgotten, reviewed) are written; a failed segment job sets its
// conversation's queued messages aside and a retry puts them back.
func TestCitusRowTriggersWriteShards(t *testing.T) {
	ctx := context.Background()
	_, conn, _ := citusMigrated(t)

	conv := uuid.New()
	var a, b, c uuid.UUID
	require.NoError(t, conn.QueryRow(ctx, `SELECT mneme.remember($1, 'The user lives in Lisbon near the river.')`, conv).Scan(&a))
	require.NoError(t, conn.QueryRow(ctx, `SELECT mneme.remember($1, 'The user owns a small red bicycle.')`, conv).Scan(&b))
	require.NoError(t, conn.QueryRow(ctx, `SELECT mneme.remember($1, 'The user works at a bakery in Lisbon.')`, conv).Scan(&c))
	_, err := conn.Exec(ctx, `UPDATE mneme.memories SET content = 'The user owns a large blue bicycle and a red car.' WHERE conversation_id = $1 AND id = $2`, conv, b)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `SELECT mneme.pin($1)`, a)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `SELECT mneme.forget($1, 'moved away')`, c)
	require.NoError(t, err)
	var reviewed bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT mneme.apply_review($1, 'good', 400, 5, 'review', now(), 'heuristic')`, b).Scan(&reviewed))
	require.True(t, reviewed)

	stats := func() string {
		var s string
		require.NoError(t, conn.QueryRow(ctx, `SELECT concat_ws(' | ',
			(SELECT string_agg(format('%s:%s:%s:%s', p.term, p.memory_id, p.tf, p.doclen), ',' ORDER BY p.term, p.memory_id)
			   FROM mneme.bm25_postings p WHERE p.conversation_id = $1),
			(SELECT string_agg(format('%s:%s', d.memory_id, d.doclen), ',' ORDER BY d.memory_id)
			   FROM mneme.bm25_docs d WHERE d.conversation_id = $1),
			(SELECT string_agg(format('%s:%s', t.term, t.df), ',' ORDER BY t.term)
			   FROM mneme.bm25_terms t WHERE t.conversation_id = $1),
			(SELECT format('%s:%s', s.n, s.total_len) FROM mneme.bm25_stats s WHERE s.conversation_id = $1))`, conv).Scan(&s))
		return s
	}
	kept := stats()
	require.Contains(t, kept, "blue", "the changed content is counted")
	require.NotContains(t, kept, "bakeri", "the forgotten memory is not")
	require.Contains(t, kept, "| 2:", "two active memories")
	_, err = conn.Exec(ctx, `SELECT mneme.bm25_reindex()`)
	require.NoError(t, err)
	require.Equal(t, stats(), kept, "the statistics the row triggers kept equal a rebuild")

	rows, err := conn.Query(ctx, `SELECT memory_id::text || ' ' || event FROM mneme.memory_events WHERE conversation_id = $1 ORDER BY id`, conv)
	require.NoError(t, err)
	events, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{a.String() + " created", b.String() + " created", c.String() + " created",
		a.String() + " pinned", c.String() + " forgotten", b.String() + " reviewed"}, events)

	// A failed segment job sets the queued messages aside; a retry puts
	// them back.
	at := time.Now().Add(-2 * time.Hour)
	for i := 0; i < 5; i++ {
		_, err = conn.Exec(ctx, `SELECT mneme.add_message($1, 'user', $2, $3)`, conv, fmt.Sprintf("message number %d about the trip", i), at.Add(time.Duration(i)*time.Minute))
		require.NoError(t, err)
	}
	_, err = conn.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'an hour later, about something else', $2)`, conv, at.Add(time.Hour))
	require.NoError(t, err)
	var job int64
	require.NoError(t, conn.QueryRow(ctx, `UPDATE mneme.jobs SET state = 'failed', last_error = 'boom', finished_at = now()
		WHERE conversation_id = $1 AND kind = 'segment' AND state = 'pending' RETURNING id`, conv).Scan(&job))
	var aside int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM mneme.set_aside_messages WHERE conversation_id = $1 AND job_id = $2`, conv, job).Scan(&aside))
	require.Equal(t, 6, aside, "the failed segment job's messages are set aside")
	_, err = conn.Exec(ctx, `SELECT mneme.retry_job($1)`, job)
	require.NoError(t, err)
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM mneme.set_aside_messages WHERE conversation_id = $1`, conv).Scan(&aside))
	require.Zero(t, aside, "a retry puts them back in the queue")
}
