package tests

import (
	"context"
	"errors"
	"math/rand"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// The helpers every test file of this package shares.

// variants lists the embedding variants this server can test: the array
// fallback always, pgvector when installed.
func variants(t *testing.T) []string {
	t.Helper()
	return dbtest.Variants(t)
}

// sqlState is the SQLSTATE of err, which must be a PostgreSQL error (the
// test fails otherwise, with the error and its message).
func sqlState(t *testing.T, err error) string {
	t.Helper()
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "want a PostgreSQL error, got %v", err)
	return pgErr.Code
}

// incompressible returns n characters that TOAST cannot compress (seeded,
// so a failure reproduces): letters and digits from a 1,000-character
// alphabet of two-byte runes.
func incompressible(seed int64, n int) string {
	r := rand.New(rand.NewSource(seed))
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteRune(rune(0x400 + r.Intn(1000)))
	}
	return b.String()
}

func counts(t *testing.T, db *dbtest.DB) string {
	var s string
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT format('%s/%s/%s/%s',
		(SELECT count(*) FROM mneme.messages), (SELECT count(*) FROM mneme.message_queue),
		(SELECT count(*) FROM mneme.jobs), (SELECT string_agg(coalesce(pending_reviews::text, 'null'), ',' ORDER BY id) FROM mneme.message_queue))`).Scan(&s))
	return s
}

// forceSetting writes a setting past set_setting's rules (as only a table
// owner can): for tests that the functions reading it still check it.
func forceSetting(t *testing.T, db *dbtest.DB, key, value string) {
	t.Helper()
	_, err := db.Pool.Exec(context.Background(), `UPDATE mneme.settings SET value = $2::jsonb WHERE key = $1`, key, value)
	require.NoError(t, err)
}

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

// requirePgError requires err to be a PostgreSQL error with SQLSTATE code
// and returns it, for its message and HINT.
func requirePgError(t *testing.T, err error, code string) *pgconn.PgError {
	t.Helper()
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "want a PostgreSQL error %s, got %v", code, err)
	require.Equal(t, code, pgErr.Code, "%s (HINT: %s)", pgErr.Message, pgErr.Hint)
	return pgErr
}

// slicesWithout is env without the variables that start with prefix.
func slicesWithout(env []string, prefix string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, prefix) {
			out = append(out, e)
		}
	}
	return out
}

// execer returns exec(q, args...): the statement run on pool, the test
// failing (with the statement) if it errs.
func execer(t *testing.T, pool interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}) func(q string, args ...any) {
	return func(q string, args ...any) {
		t.Helper()
		_, err := pool.Exec(context.Background(), q, args...)
		require.NoError(t, err, q)
	}
}
