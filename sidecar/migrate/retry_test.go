package migrate

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// A step that lost a race on a shared catalog row runs again; any other
// error is returned at once, and the race's error after the last attempt.
func TestRetryCatalog(t *testing.T) {
	ctx := context.Background()
	race := fmt.Errorf("distribute with citus: %w", &pgconn.PgError{Code: "XX000", Message: "tuple concurrently updated"})
	other := &pgconn.PgError{Code: "XX000", Message: "cache lookup failed"}

	runs := 0
	require.NoError(t, retryCatalog(ctx, func() error {
		runs++
		if runs < 3 {
			return race
		}
		return nil
	}))
	require.Equal(t, 3, runs, "ran again after each lost race")

	runs = 0
	err := retryCatalog(ctx, func() error { runs++; return other })
	require.Equal(t, 1, runs, "another internal error is not retried")
	require.ErrorIs(t, err, other)

	runs = 0
	err = retryCatalog(ctx, func() error { runs++; return race })
	require.Equal(t, catalogAttempts, runs)
	require.True(t, concurrentCatalog(err), "the last attempt's error is returned: %v", err)

	require.False(t, concurrentCatalog(errors.New("tuple concurrently updated")), "only PostgreSQL's error")
	require.False(t, concurrentCatalog(nil))
}
