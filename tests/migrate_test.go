package tests

import (
	"context"
	"io/fs"
	"regexp"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/migrate"
	sqlfiles "github.com/mneme-memory/mneme/sql"
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

// schemaFingerprint describes everything migrate creates, so a second run
// can be shown to change nothing.
func schemaFingerprint(t *testing.T, url string) string {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var fp string
	err = conn.QueryRow(ctx, `
		SELECT string_agg(x, E'\n' ORDER BY x) FROM (
		  SELECT 'col ' || table_name || '.' || column_name || ' ' || data_type || ' ' || coalesce(column_default, '') AS x
		    FROM information_schema.columns WHERE table_schema = 'mneme'
		  UNION ALL
		  SELECT 'fn ' || p.oid::regprocedure::text || ' ' || md5(pg_get_functiondef(p.oid)) || ' ' || coalesce(obj_description(p.oid, 'pg_proc'), '')
		    FROM pg_proc p WHERE p.pronamespace = 'mneme'::regnamespace AND p.prokind IN ('f', 'p')
		  UNION ALL
		  SELECT 'idx ' || indexname || ' ' || indexdef FROM pg_indexes WHERE schemaname = 'mneme'
		  UNION ALL
		  SELECT 'view ' || viewname || ' ' || md5(definition) FROM pg_views WHERE schemaname = 'mneme'
		  UNION ALL
		  SELECT 'setting ' || key || '=' || value::text FROM mneme.settings
		  UNION ALL
		  SELECT 'goose ' || version_id FROM public.mneme_goose_version
		) s`).Scan(&fp)
	require.NoError(t, err)
	return fp
}

func TestMigrateFromEmptyThenRerunChangesNothing(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			ctx := context.Background()
			_, url := dbtest.NewEmpty(t)
			res, err := migrate.Run(ctx, url, migrate.Options{Vector: variant})
			require.NoError(t, err)
			require.NotEmpty(t, res.Applied)
			require.Equal(t, variant, res.Variant)
			require.Equal(t, 256, res.Dim)
			require.Empty(t, res.Citus, "no citus extension here")
			before := schemaFingerprint(t, url)

			res2, err := migrate.Run(ctx, url, migrate.Options{Vector: variant})
			require.NoError(t, err)
			require.Empty(t, res2.Applied, "second migrate applies no goose migration")
			require.Equal(t, before, schemaFingerprint(t, url), "second migrate changes nothing")

			conn, err := pgx.Connect(ctx, url)
			require.NoError(t, err)
			defer conn.Close(ctx)
			var typ string
			require.NoError(t, conn.QueryRow(ctx, `SELECT format_type(atttypid, atttypmod) FROM pg_attribute
				WHERE attrelid = 'mneme.memories'::regclass AND attname = 'embedding'`).Scan(&typ))
			if variant == "pgvector" {
				require.Equal(t, "vector(256)", typ)
			} else {
				require.Equal(t, "mneme.embedding", typ)
			}
		})
	}
}

func TestMigrateConcurrentIsSafe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, url := dbtest.NewEmpty(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = migrate.Run(ctx, url, migrate.Options{})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}

func TestMigrateRejectsDifferentDimension(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, url := dbtest.NewEmpty(t)
	_, err := migrate.Run(ctx, url, migrate.Options{Vector: "array", EmbedDim: 64})
	require.NoError(t, err)
	_, err = migrate.Run(ctx, url, migrate.Options{Vector: "array", EmbedDim: 128})
	require.ErrorIs(t, err, migrate.ErrLayoutMismatch)
	_, err = migrate.Run(ctx, url, migrate.Options{Vector: "bogus"})
	require.Error(t, err)
}

// --- add_message and the segmentation check -----------------------------------
