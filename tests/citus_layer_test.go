package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// TestSQLRewritesNoFunction: no file of the SQL layer makes a function
// from another's text (issues 41 and 49): none reads a function's source
// or definition. The Citus forms are written in sql/*.sql or, where they
// truly differ, by hand in sql/citus/.
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

// TestEveryAPIFunctionEnters: every API function (SECURITY DEFINER,
// executable by mneme_app, mneme_worker or mneme_admin) that reaches a table
// distributed by conversation on Citus, by itself or through the mneme
// functions it calls, calls mneme._enter first (sql/005-tenants.sql says
// why; on one server it returns at once). Read from the text of sql/*.sql:
// a new API function without the call fails here, not only on a cluster.
func TestEveryAPIFunctionEnters(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t, dbtest.WithVector("array"))
	ctx := context.Background()
	// The tables Citus distributes by conversation (sql/citus/distribute.sql,
	// sidecar/migrate/citus_goose.go): message_queue and every table with a
	// conversation_id, but the reference tables.
	rows, err := db.Pool.Query(ctx, `SELECT c.relname FROM pg_catalog.pg_class c
		WHERE c.relnamespace = 'mneme'::regnamespace AND c.relkind = 'r'
		  AND (c.relname = 'message_queue' OR EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
		       WHERE a.attrelid = c.oid AND a.attname = 'conversation_id' AND NOT a.attisdropped))
		  AND c.relname NOT IN ('llm_usage_days', 'call_marks')`)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Contains(t, tables, "memories")
	rows, err = db.Pool.Query(ctx, `SELECT DISTINCT p.proname FROM pg_catalog.pg_proc p
		WHERE p.pronamespace = 'mneme'::regnamespace AND p.prosecdef
		  AND p.prolang IN (SELECT l.oid FROM pg_catalog.pg_language l WHERE l.lanname IN ('sql', 'plpgsql'))
		  AND p.proname NOT IN ('_tenant', '_resolve_tenant', '_enter', '_is_operator')
		  AND (has_function_privilege('mneme_app', p.oid, 'EXECUTE') OR has_function_privilege('mneme_worker', p.oid, 'EXECUTE')
		       OR has_function_privilege('mneme_admin', p.oid, 'EXECUTE'))`)
	require.NoError(t, err)
	api, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)

	// Every function's text (its overloads together), from sql/*.sql.
	files, err := filepath.Glob("../sql/*.sql")
	require.NoError(t, err)
	var all strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		all.Write(b)
	}
	bodies := map[string]string{}
	defs := regexp.MustCompile(`(?s)CREATE OR REPLACE FUNCTION mneme\.([a-z_0-9]+)\s*\(.*?\bAS (\$[a-z]*\$)`)
	text := all.String()
	for _, m := range defs.FindAllStringSubmatchIndex(text, -1) {
		name, tag := text[m[2]:m[3]], text[m[4]:m[5]]
		end := strings.Index(text[m[1]:], tag)
		require.GreaterOrEqual(t, end, 0, "the body of mneme.%s ends", name)
		bodies[name] += text[m[1] : m[1]+end]
	}
	reaches := map[string]bool{}
	tableRe := regexp.MustCompile(`mneme\.(` + strings.Join(tables, "|") + `)\b`)
	for name, body := range bodies {
		reaches[name] = tableRe.MatchString(body)
	}
	calls := regexp.MustCompile(`mneme\.([a-z_0-9]+)\s*\(`)
	for changed := true; changed; {
		changed = false
		for name, body := range bodies {
			if reaches[name] {
				continue
			}
			for _, c := range calls.FindAllStringSubmatch(body, -1) {
				if c[1] != "_enter" && reaches[c[1]] {
					reaches[name], changed = true, true
					break
				}
			}
		}
	}
	var missing []string
	for _, name := range api {
		if reaches[name] && !strings.Contains(bodies[name], "mneme._enter(") {
			missing = append(missing, name)
		}
	}
	require.Empty(t, missing, "API functions that reach a distributed table without calling mneme._enter first")
	require.Greater(t, len(api), 50)
}

// TestCitusRowTriggersWriteShards: on Citus the AFTER row triggers
// (through mneme._shard, sql/000-core.sql) write the colocated shards by name: the
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
