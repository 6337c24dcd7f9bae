// Package client is mneme's SQL API as typed Go functions on pgx: each
// method is one parameterised call of a mneme.* function, with no logic
// of its own (docs/sql-api.md is the contract, docs/clients.md the guide).
// The sidecar's MCP server and docs/clients/loop.go use it.
//
// A Client runs on a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx. With a
// tenant (WithTenant), every call runs in a transaction that calls
// mneme.set_tenant first (the tenant is transaction-local); Tx runs
// several calls in one. Behind PgBouncer before 1.21 in transaction
// pooling, connect with default_query_exec_mode=exec (or
// pgx.QueryExecModeExec) so pgx prepares no named statements.
package client

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DB is what a Client runs on: *pgxpool.Pool, *pgx.Conn and pgx.Tx have
// these methods.
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Client calls mneme's SQL functions.
type Client struct {
	db     DB
	tenant string
	inTx   bool
	pool   *pgxpool.Pool // Open's own pool, closed by Close
}

// New returns a Client on db whose calls run as the login's bound tenant
// or tenant "default" (WithTenant chooses one). It checks nothing;
// Connect checks the SQL API version.
func New(db DB) *Client { return &Client{db: db} }

// InTx returns a Client bound to a transaction the caller runs (and
// commits): its calls run in tx, SetTenant is allowed, and Tx runs its
// function in tx. mneme ui reads each page this way, in one snapshot.
func InTx(tx pgx.Tx) *Client { return &Client{db: tx, inTx: true} }

// Connect is New followed by CheckVersion.
func Connect(ctx context.Context, db DB) (*Client, error) {
	c := New(db)
	if _, err := c.CheckVersion(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Open connects a pool to url (a PostgreSQL URL or DSN; pgx's
// parameters such as default_query_exec_mode apply), checks the SQL API
// version and returns a Client of tenant ("": the login's bound tenant or
// "default") that owns the pool: Close closes it.
func Open(ctx context.Context, url, tenant string) (*Client, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	c, err := Connect(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	c = c.WithTenant(tenant)
	c.pool = pool
	return c, nil
}

// Close closes the pool Open made; it does nothing for a Client made by
// New or Connect (the caller owns that DB). Safe to call twice.
func (c *Client) Close() {
	if c.pool != nil {
		c.pool.Close()
	}
}

// Must returns v, or panics when err is not nil: for short programs and
// examples (docs/clients/loop.go), as template.Must.
func Must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// WithTenant returns a Client on the same DB whose calls run as tenant,
// each in a transaction that sets it ("" : no set_tenant).
func (c *Client) WithTenant(tenant string) *Client {
	return &Client{db: c.db, tenant: tenant, inTx: c.inTx, pool: c.pool}
}

// Tenant is the tenant the Client's calls set ("" for none).
func (c *Client) Tenant() string { return c.tenant }

// Tx runs fn with a Client bound to one transaction: BEGIN, set_tenant
// when the Client has a tenant, fn, COMMIT (ROLLBACK when fn or a call
// fails). Inside a Tx, Tx runs fn in the same transaction.
func (c *Client) Tx(ctx context.Context, fn func(*Client) error) error {
	if c.inTx {
		return fn(c)
	}
	return pgx.BeginFunc(ctx, c.db, func(tx pgx.Tx) error {
		in := &Client{db: tx, tenant: c.tenant, inTx: true}
		if c.tenant != "" {
			if err := in.SetTenant(ctx, c.tenant); err != nil {
				return err
			}
		}
		return fn(in)
	})
}

// SetTenant calls mneme.set_tenant: inside Tx only, since the tenant
// lasts until the end of its transaction.
func (c *Client) SetTenant(ctx context.Context, tenant string) error {
	if !c.inTx {
		return &Error{Op: "set_tenant", SQLState: "25P01",
			Message: "set_tenant outside a transaction: the tenant is transaction-local; use Tx or WithTenant",
			Hint:    "mneme.set_tenant lasts until the end of its transaction"}
	}
	_, err := c.db.Exec(ctx, `SELECT mneme.set_tenant($1)`, tenant)
	return wrap("set_tenant", err)
}

// run runs fn on a DB in the Client's tenant: directly inside a Tx or
// without a tenant, else in a transaction of its own.
func (c *Client) run(ctx context.Context, op string, fn func(DB) error) error {
	if c.inTx || c.tenant == "" {
		return wrap(op, fn(c.db))
	}
	return wrap(op, c.Tx(ctx, func(in *Client) error { return fn(in.db) }))
}

// scalar runs SELECT <call> and scans the one value into dst.
func (c *Client) scalar(ctx context.Context, q call, dst any) error {
	return c.run(ctx, q.fn, func(db DB) error {
		return db.QueryRow(ctx, "SELECT "+q.sql(), q.args...).Scan(dst)
	})
}

// rows runs SELECT cols FROM <call> and collects each row with scan.
func rows[T any](ctx context.Context, c *Client, q call, cols string, scan func(pgx.CollectableRow) (T, error)) ([]T, error) {
	var out []T
	err := c.run(ctx, q.fn, func(db DB) error {
		rs, err := db.Query(ctx, "SELECT "+cols+" FROM "+q.sql(), q.args...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rs, scan)
		return err
	})
	if out == nil && err == nil {
		out = []T{}
	}
	return out, err
}

// call is one mneme function call: positional arguments, then named ones
// (name => value) for the options given, so SQL defaults apply to the rest.
type call struct {
	fn    string
	args  []any
	named []string
}

func newCall(fn string, args ...any) call { return call{fn: fn, args: args} }

// opt adds name => v (with a cast) unless set is false.
func (q call) opt(set bool, name, cast string, v any) call {
	if set {
		q.args = append(q.args, v)
		q.named = append(q.named, fmt.Sprintf("%s => $%d%s", name, len(q.args), cast))
	}
	return q
}

func (q call) sql() string {
	s := "mneme." + q.fn + "("
	n := len(q.args) - len(q.named)
	for i := 0; i < n; i++ {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("$%d", i+1)
	}
	for i, a := range q.named {
		if n+i > 0 {
			s += ", "
		}
		s += a
	}
	return s + ")"
}
