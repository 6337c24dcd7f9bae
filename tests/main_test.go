// Package tests holds mneme's integration and end-to-end tests. They run
// against a real PostgreSQL: DATABASE_URL when set (make test sets it), else
// a private cluster the harness starts for this test binary.
package tests

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// noticeConn opens a connection to url that collects the server's notices
// (what Citus logs of its remote commands and delegation), closed after
// the test.
func noticeConn(t *testing.T, url string) (*pgx.Conn, *[]string) {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	notices := new([]string)
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { *notices = append(*notices, n.Message) }
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn, notices
}
