package scratch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/sidecar/config"
)

// node is one server of a Citus cluster.
type node struct {
	host string
	port int
}

// createCitus creates the scratch database name on a Citus cluster: Citus
// does not propagate CREATE DATABASE, so every node (the coordinator of
// opts.Server and the workers it lists in pg_dist_node) gets the database
// and the extension, then the new database's coordinator registers itself
// and the workers.
func createCitus(ctx context.Context, opts Options, log *slog.Logger, name string) (*DB, error) {
	if opts.Server == "" {
		return nil, errors.New("a Citus scratch database needs DATABASE_URL: a database of a Citus coordinator whose workers are registered there")
	}
	cfg, err := pgx.ParseConfig(opts.Server)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	coord := node{host: cfg.Host, port: int(cfg.Port)}
	workers, err := citusWorkers(ctx, opts.Server)
	if err != nil {
		return nil, err
	}
	nodes := append([]node{coord}, workers...)
	var created []node
	dropAll := func() {
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// The coordinator first: it holds connections to the workers'
		// copies.
		for _, n := range created {
			if err := execOn(dctx, opts.Server, n, cfg.Database, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
				log.Warn("drop scratch database", "name", name, "node", n.addr(), "err", err)
			}
		}
	}
	for _, n := range nodes {
		if err := execOn(ctx, opts.Server, n, cfg.Database, "CREATE DATABASE "+name); err != nil {
			dropAll()
			return nil, fmt.Errorf("create scratch database %s on %s: %w (the run needs CREATEDB on every node)", name, n.addr(), err)
		}
		created = append(created, n)
		if err := execOn(ctx, opts.Server, n, name, "CREATE EXTENSION citus"); err != nil {
			dropAll()
			return nil, fmt.Errorf("citus extension in %s on %s: %w", name, n.addr(), err)
		}
	}
	dsn, err := WithDatabase(opts.Server, name)
	if err != nil {
		dropAll()
		return nil, err
	}
	if err := register(ctx, dsn, coord, workers); err != nil {
		dropAll()
		return nil, err
	}
	return &DB{Name: name, URL: dsn, drop: func() {
		if opts.Keep {
			log.Warn("scratch database kept (on every node of the Citus cluster)", "name", name, "url", config.Redact(dsn))
			return
		}
		dropAll()
	}}, nil
}

// citusWorkers are the primary workers registered in the coordinator's
// database of server.
func citusWorkers(ctx context.Context, server string) ([]node, error) {
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", config.Redact(server), err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT nodename, nodeport FROM pg_dist_node WHERE noderole = 'primary' AND groupid <> 0 ORDER BY nodeid`)
	if err != nil {
		return nil, fmt.Errorf("list the Citus workers of %s (DATABASE_URL must name a database of a Citus coordinator with the extension): %w",
			config.Redact(server), err)
	}
	workers, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (node, error) {
		var n node
		err := r.Scan(&n.host, &n.port)
		return n, err
	})
	if err != nil {
		return nil, err
	}
	if len(workers) == 0 {
		return nil, fmt.Errorf("%s lists no Citus workers (pg_dist_node): add them with citus_add_node", config.Redact(server))
	}
	return workers, nil
}

// register makes the database of dsn a coordinator of the workers.
func register(ctx context.Context, dsn string, coord node, workers []node) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SELECT citus_set_coordinator_host($1, $2)`, coord.host, coord.port); err != nil {
		return fmt.Errorf("citus_set_coordinator_host: %w", err)
	}
	for _, w := range workers {
		// A connection to a worker that has just made the database can
		// fail once on a loaded machine ("failure on connection marked as
		// essential"): a few tries before giving up.
		for try := 1; ; try++ {
			_, err := conn.Exec(ctx, `SELECT citus_add_node($1, $2)`, w.host, w.port)
			if err == nil {
				break
			}
			if try == 5 || !strings.Contains(err.Error(), "failure on connection") {
				return fmt.Errorf("citus_add_node %s: %w", w.addr(), err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(try) * 500 * time.Millisecond):
			}
		}
	}
	return nil
}

// execOn runs sql in database db of node n, connecting with server's user,
// password and options.
func execOn(ctx context.Context, server string, n node, db, sql string) error {
	cfg, err := pgx.ParseConfig(server)
	if err != nil {
		return err
	}
	cfg.Host, cfg.Port, cfg.Database = n.host, uint16(n.port), db
	cfg.Fallbacks = nil
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

func (n node) addr() string { return net.JoinHostPort(n.host, strconv.Itoa(n.port)) }
