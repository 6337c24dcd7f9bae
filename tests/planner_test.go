package tests

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// TestInlinedHelpersStayInlinable: the helpers the ranking calls per row
// (and add_message's blank check, per message, and cleanup's eligibility,
// per memory) are plain immutable SQL
// without SET and stay SECURITY INVOKER (their CREATE FUNCTION says
// neither), which is what lets the planner
// inline them; made SECURITY DEFINER or given a SET they would be called
// once per row.
func TestInlinedHelpersStayInlinable(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	rows, err := db.Pool.Query(context.Background(), `
		SELECT p.proname || ': ' || CASE WHEN l.lanname = 'sql' AND NOT p.prosecdef AND p.proconfig IS NULL
		                                      AND p.provolatile = 'i' THEN 'inlinable' ELSE 'not inlinable' END
		FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
		WHERE p.pronamespace = 'mneme'::regnamespace
		  AND p.proname IN ('_retrievability', '_bm25_weight', '_bm25_tf', '_label_key', '_word_separator', '_is_blank',
		                   '_cleanup_eligible')
		ORDER BY 1`)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"_bm25_tf: inlinable", "_bm25_weight: inlinable", "_cleanup_eligible: inlinable", "_is_blank: inlinable",
		"_label_key: inlinable", "_retrievability: inlinable", "_word_separator: inlinable"}, got)

	// And the planner does inline cleanup's predicate: the plan filters on
	// the columns, with no call left.
	rows, err = db.Pool.Query(context.Background(), `EXPLAIN (VERBOSE) SELECT count(*) FROM mneme.memories m
		WHERE mneme._cleanup_eligible(m.status, m.pinned, m.label, 'active')`)
	require.NoError(t, err)
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.NotContains(t, strings.Join(plan, "\n"), "_cleanup_eligible")
	require.Contains(t, strings.Join(plan, "\n"), "(m.status = 'active'::text)")
}

// TestEntryPointsRunWithoutJIT: every PL/pgSQL function a role may call
// runs with jit = off (SET jit = off in its CREATE FUNCTION), so a planner estimate
// that passes jit_above_cost inside a call never compiles (JIT took 300 ms
// of a 10 ms extractive_summary). The function named here is the one that
// showed it; the query lists any entry point without the setting.
func TestEntryPointsRunWithoutJIT(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	rows, err := db.Pool.Query(ctx, `
		SELECT p.oid::regprocedure::text
		FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
		WHERE p.pronamespace = 'mneme'::regnamespace AND l.lanname = 'plpgsql'
		  AND (has_function_privilege('mneme_app', p.oid, 'EXECUTE')
		       OR has_function_privilege('mneme_worker', p.oid, 'EXECUTE')
		       OR has_function_privilege('mneme_admin', p.oid, 'EXECUTE'))
		  AND NOT coalesce('jit=off' = ANY (p.proconfig), false)
		  AND p.proname NOT IN ('_tenant', '_resolve_tenant', '_is_worker', 'change_embedding_dim', 'erase_vacuum_targets')
		ORDER BY 1`)
	require.NoError(t, err)
	missing, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Empty(t, missing, "entry points that may JIT-compile their statements")

	var cfg []string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT proconfig FROM pg_proc
		WHERE oid = 'mneme.extractive_summary(uuid, text[], text[], int)'::regprocedure`).Scan(&cfg))
	require.Contains(t, cfg, "jit=off")
}
