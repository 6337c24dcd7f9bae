package migrate

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// concurrentCatalog reports whether err is PostgreSQL's "tuple concurrently
// updated" (XX000): another migrate changed the same row of a catalog
// shared by every database of the cluster (a role: sql/citus/distribute.sql
// makes mneme_owner a login, the SQL layer grants the group roles) at the
// same moment. The transaction rolled back whole and may run again. Seen
// when a Citus cluster migrated several databases at once (the citus
// deployment's tests, 2026-11-28).
func concurrentCatalog(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "XX000" && strings.Contains(pg.Message, "tuple concurrently updated")
}

// catalogAttempts bounds retryCatalog's runs of a step.
const catalogAttempts = 5

// retryCatalog runs step, one transaction of the migrate, again while it
// fails by concurrentCatalog (at most catalogAttempts runs, 100 ms, 200 ms,
// ... apart); any other error, or the last, is returned as it is.
func retryCatalog(ctx context.Context, step func() error) error {
	for attempt := 1; ; attempt++ {
		err := step()
		if err == nil || attempt == catalogAttempts || !concurrentCatalog(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
		}
	}
}
