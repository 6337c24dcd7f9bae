package tests

import (
	"context"
	"io/fs"
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	sqlfiles "github.com/mneme-memory/mneme/sql"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/migrate"
)

// A user's views over mneme's functions survive every migrate: the SQL
// layer, re-applied each time, replaces functions and never drops one.
func TestMigrateKeepsDependentViews(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, url := dbtest.NewEmpty(t)
	_, err := migrate.Run(ctx, url, migrate.Options{})
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `CREATE SCHEMA reports;
		CREATE VIEW reports.beliefs AS SELECT * FROM mneme.inspect('00000000-0000-4000-8000-000000000001');
		CREATE VIEW reports.lineage AS SELECT * FROM mneme.history('00000000-0000-4000-8000-000000000001');
		CREATE VIEW reports.found AS SELECT * FROM mneme.search('00000000-0000-4000-8000-000000000001', 'x');`)
	require.NoError(t, err)
	for range 2 {
		_, err = migrate.Run(ctx, url, migrate.Options{})
		require.NoError(t, err, "migrate with views depending on mneme's functions")
	}
	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_views WHERE schemaname = 'reports'`).Scan(&n))
	require.Equal(t, 3, n)
}

// Nothing in the idempotent SQL layer drops a function: old signatures are
// dropped once, by a numbered goose migration.
func TestSQLLayerDropsNoFunction(t *testing.T) {
	t.Parallel()
	drop := regexp.MustCompile(`(?im)^\s*DROP\s+FUNCTION`)
	files, err := fs.Glob(sqlfiles.FS, "*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		b, err := fs.ReadFile(sqlfiles.FS, f)
		require.NoError(t, err)
		require.False(t, drop.Match(b), "%s drops a function: move it to a goose migration", f)
	}
}
