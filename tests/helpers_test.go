package tests

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// The helpers every test file of this package shares.

// variants lists the embedding variants this server can test: the array
// fallback always, pgvector when installed.
func variants(t *testing.T) []string {
	t.Helper()
	v := []string{"array"}
	if dbtest.HasPgvector(t) {
		v = append(v, "pgvector")
	} else {
		t.Log("pgvector not installed on the test server: testing the array fallback only")
	}
	return v
}

// sqlState is the SQLSTATE of err, which must be a PostgreSQL error (the
// test fails otherwise, with the error and its message).
func sqlState(t *testing.T, err error) string {
	t.Helper()
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "want a PostgreSQL error, got %v", err)
	return pgErr.Code
}
