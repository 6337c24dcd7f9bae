package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Citus is a private Citus cluster: a coordinator and its workers, each a
// private server of its own under one directory, registered with each
// other in their maintenance database ("postgres"), where a scratch
// database's set-up (sidecar/scratch) finds the workers.
type Citus struct {
	Coordinator *Cluster
	Workers     []*Cluster
}

// citusSettings are what Citus needs on every node (docs/scale.md): the
// library preloaded, two-phase commit for a call that writes two workers.
// The tests' shard count is small: a test database is distributed once per
// test, and 32 shards of every table on two cores make that the test's
// cost; 4 still spread every table over both workers.
var citusSettings = []string{
	"shared_preload_libraries = 'citus'",
	"max_prepared_transactions = 200",
	"citus.shard_count = 4",
	// The private servers have no TLS; libpq inside the server would
	// otherwise look for client certificates under the calling user's
	// home, which the server user may not read.
	"citus.node_conninfo = 'sslmode=disable'",
}

// ErrNoCitus means the server binaries found cannot load the citus
// extension.
var ErrNoCitus = errors.New("the PostgreSQL server has no citus extension")

// HasExtension reports whether the server in binDir ships extension name
// (its control file in the server's share directory; pg_config, like the
// server, finds that directory relative to its binary, so a copied tree
// reports its own).
func HasExtension(binDir, name string) bool {
	out, err := exec.Command(filepath.Join(binDir, "pg_config"), "--sharedir").Output()
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(strings.TrimSpace(string(out)), "extension", name+".control"))
	return err == nil
}

// StartCitus starts (or reuses) a Citus cluster of a coordinator and n
// workers under dir (dir/coordinator, dir/worker1, ...), and registers the
// workers with the coordinator in its maintenance database.
func StartCitus(ctx context.Context, dir string, n int, opts Options) (*Citus, error) {
	if n < 1 {
		return nil, fmt.Errorf("a Citus cluster needs at least one worker, not %d", n)
	}
	bin, err := FindBinDir()
	if err != nil {
		return nil, err
	}
	if !HasExtension(bin, "citus") {
		return nil, fmt.Errorf("%w in %s: build it with scripts/extensions.sh and point PG_BINDIR at the tree it prints", ErrNoCitus, bin)
	}
	opts.Settings = append(append([]string{}, citusSettings...), opts.Settings...)
	c := &Citus{}
	start := func(name string) (*Cluster, error) {
		node, err := Start(ctx, filepath.Join(dir, name), opts)
		if err != nil {
			c.stop(ctx)
			return nil, fmt.Errorf("citus %s: %w", name, err)
		}
		return node, nil
	}
	if c.Coordinator, err = start("coordinator"); err != nil {
		return nil, err
	}
	for i := 1; i <= n; i++ {
		w, err := start("worker" + strconv.Itoa(i))
		if err != nil {
			return nil, err
		}
		c.Workers = append(c.Workers, w)
	}
	for _, node := range append([]*Cluster{c.Coordinator}, c.Workers...) {
		if err := node.psql(ctx, "postgres", "CREATE EXTENSION IF NOT EXISTS citus"); err != nil {
			c.stop(ctx)
			return nil, err
		}
	}
	reg := fmt.Sprintf("SELECT citus_set_coordinator_host('127.0.0.1', %d);", c.Coordinator.Port)
	for _, w := range c.Workers {
		// A reused cluster keeps its registrations; a worker whose port
		// changed is registered again.
		reg += fmt.Sprintf(" SELECT citus_add_node('127.0.0.1', %d) WHERE NOT EXISTS (SELECT 1 FROM pg_dist_node WHERE nodeport = %d);", w.Port, w.Port)
	}
	if err := c.Coordinator.psql(ctx, "postgres", reg); err != nil {
		c.stop(ctx)
		return nil, err
	}
	return c, nil
}

// URL is a connection URL for database db of the coordinator.
func (c *Citus) URL(db string) string { return c.Coordinator.URL(db) }

// Stop stops every node. Safe to call twice.
func (c *Citus) Stop(ctx context.Context) error { return c.stop(ctx) }

// Remove deletes every node's data directory (the nodes must be stopped).
func (c *Citus) Remove() error {
	var errs []error
	for _, node := range c.nodes() {
		errs = append(errs, node.Remove())
	}
	return errors.Join(errs...)
}

func (c *Citus) nodes() []*Cluster {
	var all []*Cluster
	if c.Coordinator != nil {
		all = append(all, c.Coordinator)
	}
	return append(all, c.Workers...)
}

func (c *Citus) stop(ctx context.Context) error {
	var errs []error
	for _, node := range c.nodes() {
		errs = append(errs, node.Stop(ctx))
	}
	return errors.Join(errs...)
}

// psql runs sql in database db as the superuser.
func (c *Cluster) psql(ctx context.Context, db, sql string) error {
	out, err := exec.CommandContext(ctx, filepath.Join(c.BinDir, "psql"), c.URL(db), "-XAtq", "-v", "ON_ERROR_STOP=1", "-c", sql).CombinedOutput()
	if err != nil {
		return fmt.Errorf("psql on port %d: %s: %w: %s", c.Port, sql, err, strings.TrimSpace(string(out)))
	}
	return nil
}
