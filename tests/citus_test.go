package tests

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/migrate"
)

// TestMigrateOnCitusSaysTablesStayLocal: on a Citus coordinator
// (MNEME_TEST_CITUS_URL, a database with the citus extension; never set in
// make test) migrate succeeds, reports the extension and warns that
// nothing is distributed; mneme's tables stay local to the coordinator and
// the API works there as on one server (docs/scale.md).
func TestMigrateOnCitusSaysTablesStayLocal(t *testing.T) {
	base := os.Getenv("MNEME_TEST_CITUS_URL")
	if base == "" {
		t.Skip("MNEME_TEST_CITUS_URL is not set: no Citus coordinator to migrate (docs/scale.md)")
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	require.NoError(t, err)
	defer admin.Close(ctx)
	name := "mneme_citus_" + uuid.NewString()[:8]
	_, err = admin.Exec(ctx, "CREATE DATABASE "+name)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP DATABASE "+name+" WITH (FORCE)") })
	cfg, err := pgx.ParseConfig(base)
	require.NoError(t, err)
	url := fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE EXTENSION citus")
	require.NoError(t, err)

	var logged bytes.Buffer
	res, err := migrate.Run(ctx, url, migrate.Options{Vector: "array", Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	require.NoError(t, err)
	require.NotEmpty(t, res.Citus)
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
