package tests

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// requirePgError requires err to be a PostgreSQL error with SQLSTATE code
// and returns it, for its message and HINT.
func requirePgError(t *testing.T, err error, code string) *pgconn.PgError {
	t.Helper()
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "want a PostgreSQL error %s, got %v", code, err)
	require.Equal(t, code, pgErr.Code, "%s (HINT: %s)", pgErr.Message, pgErr.Hint)
	return pgErr
}
