package cli

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// A command's error shows the HINT of the PostgreSQL error under it (what
// mneme's SQL says to do), once.
func TestHint(t *testing.T) {
	pg := &pgconn.PgError{Code: "42501", Message: "role x must be a member of mneme_owner", Hint: "an admin runs once: GRANT mneme_owner TO x"}
	require.Equal(t, pg.Hint, Hint(fmt.Errorf("apply sql/900-access.sql: %w", pg)))
	require.Empty(t, Hint(fmt.Errorf("tenant %q: %w (%s)", "t", pg, pg.Hint)), "already in the message")
	require.Empty(t, Hint(fmt.Errorf("no database error")))
}
