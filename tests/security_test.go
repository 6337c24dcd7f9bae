package tests

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// Every SECURITY DEFINER function of the schema sets its search_path, so
// no caller's search_path (a schema of theirs with an operator or function
// of the same name) runs inside it with the owner's rights.
func TestSecurityDefinerSetsSearchPath(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	rows, err := db.Pool.Query(context.Background(), `
		SELECT p.oid::regprocedure::text FROM pg_proc p
		WHERE p.pronamespace = 'mneme'::regnamespace AND p.prosecdef
		  AND NOT EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search_path=%')
		ORDER BY 1`)
	require.NoError(t, err)
	missing, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Empty(t, missing)
	var n int
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_proc p
		WHERE p.pronamespace = 'mneme'::regnamespace AND p.prosecdef`).Scan(&n))
	require.Greater(t, n, 50, "the API functions are SECURITY DEFINER (declared in their CREATE FUNCTION)")
}

// TestFunctionAccessBesideFunction: a function's grants stand beside it
// (issue 49): every GRANT EXECUTE ON FUNCTION of sql/*.sql is in the file
// that creates the function, and sql/900-access.sql grants EXECUTE only to
// PUBLIC, on the row policies' functions. A group role's EXECUTE comes
// from nowhere else: after migrate, every function a group role may call
// has such a GRANT in its file.
func TestFunctionAccessBesideFunction(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../sql/*.sql")
	require.NoError(t, err)
	created := map[string]string{} // function name -> file
	granted := map[string]bool{}
	createRe := regexp.MustCompile(`CREATE OR REPLACE FUNCTION mneme\.([a-z_0-9]+)\s*\(`)
	grantRe := regexp.MustCompile(`(?m)^GRANT EXECUTE ON FUNCTION (.*) TO ([a-z_, ]+);`)
	nameRe := regexp.MustCompile(`mneme\.([a-z_0-9]+)\s*\(`)
	type grant struct{ file, name, to string }
	var grants []grant
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range createRe.FindAllStringSubmatch(string(b), -1) {
			created[m[1]] = filepath.Base(f)
		}
		for _, m := range grantRe.FindAllStringSubmatch(string(b), -1) {
			for _, n := range nameRe.FindAllStringSubmatch(m[1], -1) {
				grants = append(grants, grant{filepath.Base(f), n[1], m[2]})
			}
		}
	}
	for _, g := range grants {
		if g.file == "900-access.sql" {
			require.Equal(t, "PUBLIC", g.to, "sql/900-access.sql grants %s to a group role: grant it beside the function", g.name)
			continue
		}
		require.Equal(t, created[g.name], g.file, "the GRANT on mneme.%s stands in the file that creates it", g.name)
		granted[g.name] = true
	}

	db := dbtest.New(t, dbtest.WithVector("array"))
	rows, err := db.Pool.Query(context.Background(), `SELECT DISTINCT p.proname FROM pg_proc p
		WHERE p.pronamespace = 'mneme'::regnamespace
		  AND (has_function_privilege('mneme_app', p.oid, 'EXECUTE') OR has_function_privilege('mneme_worker', p.oid, 'EXECUTE')
		       OR has_function_privilege('mneme_admin', p.oid, 'EXECUTE'))
		  AND p.proname NOT IN ('_tenant', '_resolve_tenant', '_is_worker', '_is_operator')
		ORDER BY 1`)
	require.NoError(t, err)
	callable, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Greater(t, len(callable), 100)
	for _, name := range callable {
		require.True(t, granted[name], "mneme.%s is callable by a group role without a GRANT beside it", name)
	}

	// Nothing sets them for a function any more (sql/900-access.sql did,
	// from name lists): a new function says them itself. An API function
	// (no leading underscore, not a trigger's) is granted to a group role;
	// a function that is not SECURITY DEFINER is plain SQL without SET
	// (inlined) or one of those that run as their caller.
	rows, err = db.Pool.Query(context.Background(), `SELECT p.oid::regprocedure::text FROM pg_proc p
		WHERE p.pronamespace = 'mneme'::regnamespace AND p.prorettype <> 'pg_catalog.trigger'::regtype
		  AND ((p.proname NOT LIKE '\_%'
		        AND NOT (has_function_privilege('mneme_app', p.oid, 'EXECUTE') OR has_function_privilege('mneme_worker', p.oid, 'EXECUTE')
		                 OR has_function_privilege('mneme_admin', p.oid, 'EXECUTE')))
		    OR (NOT p.prosecdef
		        AND NOT (p.prolang = (SELECT l.oid FROM pg_language l WHERE l.lanname = 'sql') AND p.proconfig IS NULL)
		        AND p.proname NOT IN ('change_embedding_dim', 'vector_index_plan', 'vector_index_status', 'erase_vacuum_targets')))
		ORDER BY 1`)
	require.NoError(t, err)
	undeclared, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Empty(t, undeclared, "functions without SECURITY DEFINER in their CREATE FUNCTION, or API functions without a GRANT")
}
