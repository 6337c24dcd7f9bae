package tests

import (
	"context"
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
	require.Greater(t, n, 50, "the API functions are SECURITY DEFINER (sql/900-access.sql)")
}
