package events

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrPooled means DATABASE_URL reaches PostgreSQL through a connection
// pooler (PgBouncer, pgpool-II), where a transport that needs a session of
// its own cannot work.
var ErrPooled = errors.New("DATABASE_URL reaches PostgreSQL through a connection pooler such as PgBouncer")

// Pooled reports whether the pool's server sits behind a connection
// pooler. A pooler answers the client's startup itself and hands out a
// cancel key of its own (BackendKeyData, which PgBouncer makes up), so the
// process id the connection was given is not that of the backend running
// its queries; directly, or through a TCP proxy or port mapping that passes
// the key on, the two are the same. No admin console is needed, and
// server_version tells nothing: PgBouncer passes the server's on.
func Pooled(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("detect a connection pooler: %w", err)
	}
	defer c.Release()
	var pid int32
	if err := c.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		return false, fmt.Errorf("detect a connection pooler: %w", err)
	}
	return uint32(pid) != c.Conn().PgConn().PID(), nil
}

// NeedsSession reports whether transport (auto included) needs a server
// session of its own: LISTEN/NOTIFY and logical replication do, which
// transaction pooling does not give; poll needs none.
func NeedsSession(transport string) bool { return transport != Poll }

// CheckDirect refuses a pool behind a connection pooler (an error wrapping
// ErrPooled) when transport needs a session, and for poll when pgx would
// prepare named statements (its default mode), which another client's
// transaction on the same server connection breaks before PgBouncer 1.21;
// nil for a direct connection.
func CheckDirect(ctx context.Context, pool *pgxpool.Pool, transport string) error {
	pooled, err := Pooled(ctx, pool)
	if err != nil || !pooled {
		return err
	}
	if NeedsSession(transport) {
		return fmt.Errorf("%w (the backend's process id is not the one the connection was given): "+
			"MNEME_EVENTS=%s needs a session of its own (LISTEN/NOTIFY or logical replication), which a pooler "+
			"does not keep; point the sidecar's DATABASE_URL at PostgreSQL itself (the pool is for the "+
			"application's calls; docs/clients.md, \"Behind a pool\")", ErrPooled, transport)
	}
	switch pool.Config().ConnConfig.DefaultQueryExecMode {
	case pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol:
		return nil
	}
	return fmt.Errorf("%w (the backend's process id is not the one the connection was given): "+
		"MNEME_EVENTS=poll works through it only without named prepared statements: add "+
		"default_query_exec_mode=exec to DATABASE_URL, or point it at PostgreSQL itself (docs/clients.md, \"Behind a pool\")", ErrPooled)
}
