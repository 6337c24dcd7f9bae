// Package dbtest gives tests an isolated, migrated mneme database on a real
// PostgreSQL. With DATABASE_URL set it uses that server; otherwise it
// starts a private cluster for the test binary (a Citus cluster of a
// coordinator and two workers for the citus deployment), which Main stops
// at the end. Every New call creates a fresh database from a migrated
// template (one template per embedding variant), so tests never see each
// other's rows and may run in parallel.
//
// MNEME_TEST_DEPLOYMENT chooses what a run tests (scripts/test.sh runs one
// binary per deployment; docs/tests.md):
//
//	array     the array fallback only
//	pgvector  the pgvector variant only (the extension must be installable)
//	citus     a private Citus cluster, every New database distributed
//	(unset)   the array fallback, and pgvector too where it is installed
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/cluster"
	"github.com/mneme-memory/mneme/sidecar/migrate"
	"github.com/mneme-memory/mneme/sidecar/scratch"
)

// DB is one test's database.
type DB struct {
	Name    string
	URL     string // connection URL of this database
	Pool    *pgxpool.Pool
	Variant string // pgvector | array
}

var (
	serverOnce sync.Once
	serverURL  string // URL of the maintenance database ("postgres")
	serverErr  error
	private    *cluster.Cluster

	citus *cluster.Citus

	tmplMu sync.Mutex
	tmpls  = map[string]string{} // variant request -> template db name
)

// Main runs the tests and stops the private cluster, if one was started.
// Call it from TestMain: func TestMain(m *testing.M) { dbtest.Main(m) }.
func Main(m *testing.M) {
	if err := checkDeployment(); err != nil {
		fmt.Fprintln(os.Stderr, "dbtest:", err)
		os.Exit(2)
	}
	code := m.Run()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	if private != nil {
		_ = private.Stop(ctx)
		_ = private.Remove()
	}
	if citus != nil {
		_ = citus.Stop(ctx)
		_ = citus.Remove()
	}
	cancel()
	os.Exit(code)
}

// The deployments a run may test (MNEME_TEST_DEPLOYMENT).
const (
	DeploymentArray    = "array"
	DeploymentPgvector = "pgvector"
	DeploymentCitus    = "citus"
)

// Deployment is the deployment this run tests: MNEME_TEST_DEPLOYMENT, or
// "" for the default (the array fallback, and pgvector where installed).
func Deployment() string { return os.Getenv("MNEME_TEST_DEPLOYMENT") }

func checkDeployment() error {
	switch d := Deployment(); d {
	case "", DeploymentArray, DeploymentPgvector, DeploymentCitus:
		return nil
	default:
		return fmt.Errorf("MNEME_TEST_DEPLOYMENT=%q: want array, pgvector or citus (or unset for array and pgvector where installed)", d)
	}
}

// Variants are the vector variants this run tests, in order: the array
// fallback always in the default run, pgvector too where the server has
// it; one of them in an array or pgvector run; the array fallback on
// Citus.
func Variants(t testing.TB) []string {
	t.Helper()
	switch Deployment() {
	case DeploymentArray, DeploymentCitus:
		return []string{"array"}
	case DeploymentPgvector:
		return []string{"pgvector"}
	}
	if HasPgvector(t) {
		return []string{"array", "pgvector"}
	}
	t.Log("pgvector not installed on the test server: testing the array fallback only (scripts/extensions.sh builds it; docs/tests.md)")
	return []string{"array"}
}

// Cluster returns the private cluster, or nil when DATABASE_URL points at an
// external server. Tests that restart the server need it.
func Cluster(t testing.TB) *cluster.Cluster {
	ServerURL(t)
	return private
}

// ServerURL is the URL of the server's maintenance database.
func ServerURL(t testing.TB) string {
	t.Helper()
	serverOnce.Do(func() {
		if u := os.Getenv("DATABASE_URL"); u != "" {
			if _, err := pgx.ParseConfig(u); err != nil {
				serverErr = fmt.Errorf("DATABASE_URL: %w", err)
				return
			}
			serverURL, serverErr = scratch.WithDatabase(u, "postgres")
			return
		}
		dir, err := os.MkdirTemp("", "mneme-test-pg-")
		if err != nil {
			serverErr = err
			return
		}
		_ = os.Chmod(dir, 0o755)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if Deployment() == DeploymentCitus {
			citus, serverErr = cluster.StartCitus(ctx, dir, 2, cluster.Options{Disposable: true})
			if serverErr == nil {
				serverURL = citus.URL("postgres")
			}
			return
		}
		private, serverErr = cluster.Start(ctx, dir+"/data", cluster.Options{Disposable: true})
		if serverErr == nil {
			serverURL = private.URL("postgres")
		}
	})
	if serverErr != nil {
		t.Fatalf("test PostgreSQL: %v", serverErr)
	}
	return serverURL
}

// Option tunes New.
type Option func(*options)

type options struct{ vector string }

// WithVector forces the embedding variant: "pgvector" or "array". Default
// "auto": the deployment's (array or pgvector runs), else pgvector where
// installed, else array.
func WithVector(v string) Option { return func(o *options) { o.vector = v } }

// HasPgvector reports whether this run tests pgvector: always in a pgvector
// run (which fails here when the server cannot install the extension),
// never in an array or Citus run, and where the server can install it
// otherwise.
func HasPgvector(t testing.TB) bool {
	t.Helper()
	switch Deployment() {
	case DeploymentArray, DeploymentCitus:
		return false
	case DeploymentPgvector:
		if !serverHasPgvector(t) {
			t.Fatalf("MNEME_TEST_DEPLOYMENT=pgvector, but the test server cannot install the vector extension: build it with scripts/extensions.sh (docs/tests.md)")
		}
		return true
	}
	return serverHasPgvector(t)
}

func serverHasPgvector(t testing.TB) bool {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, ServerURL(t))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')`).Scan(&ok); err != nil {
		t.Fatalf("check pgvector: %v", err)
	}
	return ok
}

// New creates a fresh migrated database for this test and drops it after.
func New(t testing.TB, opts ...Option) *DB {
	t.Helper()
	o := options{vector: "auto"}
	for _, f := range opts {
		f(&o)
	}
	if o.vector == "auto" {
		switch Deployment() {
		case DeploymentArray, DeploymentCitus:
			o.vector = "array"
		case DeploymentPgvector:
			o.vector = "pgvector"
		}
	}
	ctx := context.Background()
	if OnCitus() {
		return newOnCitus(t, o.vector)
	}
	tmpl := template(t, o.vector)
	name := "mneme_t_" + randHex(6)
	admin := connect(t, ServerURL(t))
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, fmt.Sprintf(`CREATE DATABASE %s TEMPLATE %s`, name, tmpl)); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		c := connect(t, ServerURL(t))
		defer c.Close(ctx)
		// Replication slots pin a database; drop this test's first.
		_, _ = c.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND NOT active`, name)
		if _, err := c.Exec(ctx, fmt.Sprintf(`DROP DATABASE IF EXISTS %s WITH (FORCE)`, name)); err != nil {
			t.Logf("drop test database %s: %v", name, err)
		}
	})
	return attach(t, admin, name, databaseURL(t, name))
}

// attach makes a migrated test database ready for a test (admin: a
// connection to the server's maintenance database): the tests' job
// kinds allowed, a pool (closed before the database is dropped: register
// the drop first), the vector variant read.
func attach(t testing.TB, admin *pgx.Conn, name, url string) *DB {
	t.Helper()
	ctx := context.Background()
	// The job queue's own tests enqueue kinds of their own (mneme.enqueue_job
	// accepts only the sidecar's kinds unless mneme.job_kinds lists others);
	// TestEnqueueJobKnownKinds checks the rule with the setting cleared.
	if _, err := admin.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %s SET mneme.job_kinds = '*'`, name)); err != nil {
		t.Fatalf("allow the tests' job kinds: %v", err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	t.Cleanup(pool.Close)
	db := &DB{Name: name, URL: url, Pool: pool}
	if err := pool.QueryRow(ctx, `SELECT value #>> '{}' FROM mneme.settings WHERE key = 'vector_variant'`).Scan(&db.Variant); err != nil {
		t.Fatalf("read variant: %v", err)
	}
	return db
}

// CitusURL is the maintenance database of a Citus coordinator for the
// tests that make their own Citus databases: the harness's cluster in the
// citus deployment, else MNEME_TEST_CITUS_URL; the test is skipped when
// there is neither.
func CitusURL(t testing.TB) string {
	t.Helper()
	if Deployment() == DeploymentCitus {
		return ServerURL(t)
	}
	u := os.Getenv("MNEME_TEST_CITUS_URL")
	if u == "" {
		t.Skip("no Citus cluster: the citus deployment of scripts/test.sh starts one (MNEME_TEST_DEPLOYMENT=citus), or set MNEME_TEST_CITUS_URL (docs/tests.md)")
	}
	return u
}

// OnCitus reports whether the suite runs on a Citus cluster: the citus
// deployment (the harness's private cluster, or DATABASE_URL naming a
// Citus coordinator), or MNEME_TEST_ON_CITUS=1 with DATABASE_URL naming a
// coordinator whose workers are registered in its maintenance database.
// Then every New database is created on every node and distributed
// (migrate --citus).
func OnCitus() bool {
	return Deployment() == DeploymentCitus || os.Getenv("MNEME_TEST_ON_CITUS") == "1"
}

// newOnCitus is New on a Citus cluster: no template (a database of a Citus
// cluster exists on every node), a scratch database distributed by migrate
// --citus, dropped on every node after the test.
func newOnCitus(t testing.TB, vector string) *DB {
	t.Helper()
	ctx := context.Background()
	sdb, err := scratch.Create(ctx, scratch.Options{Server: ServerURL(t), Prefix: "mneme_t_", Citus: true})
	if err != nil {
		t.Fatalf("create test database on the Citus cluster: %v", err)
	}
	t.Cleanup(sdb.Close)
	if _, err := migrate.Run(ctx, sdb.URL, migrate.Options{Vector: vector, Citus: true}); err != nil {
		t.Fatalf("migrate --citus: %v", err)
	}
	admin := connect(t, ServerURL(t))
	defer admin.Close(ctx)
	return attach(t, admin, sdb.Name, sdb.URL)
}

// NewEmpty creates an empty, unmigrated database (for migration tests).
func NewEmpty(t testing.TB) (name, url string) {
	t.Helper()
	ctx := context.Background()
	name = "mneme_e_" + randHex(6)
	admin := connect(t, ServerURL(t))
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		c := connect(t, ServerURL(t))
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, fmt.Sprintf(`DROP DATABASE IF EXISTS %s WITH (FORCE)`, name))
	})
	return name, databaseURL(t, name)
}

// template returns a migrated template database for the variant, made once
// per test binary and dropped never (it lives as long as the cluster; with an
// external server it is reused by name per process only).
func template(t testing.TB, vector string) string {
	t.Helper()
	tmplMu.Lock()
	defer tmplMu.Unlock()
	if name, ok := tmpls[vector]; ok {
		return name
	}
	ctx := context.Background()
	name := fmt.Sprintf("mneme_tmpl_%s_%s", vector, randHex(4))
	admin := connect(t, ServerURL(t))
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+name); err != nil {
		t.Fatalf("create template: %v", err)
	}
	if _, err := migrate.Run(ctx, databaseURL(t, name), migrate.Options{Vector: vector}); err != nil {
		_, _ = admin.Exec(ctx, `DROP DATABASE `+name)
		t.Fatalf("migrate template (%s): %v", vector, err)
	}
	if private == nil {
		// On a shared server, drop our templates when the process ends is
		// not possible from a library; mark them so they are easy to find.
		_, _ = admin.Exec(ctx, fmt.Sprintf(`COMMENT ON DATABASE %s IS 'mneme test template, safe to drop'`, name))
	}
	tmpls[vector] = name
	return name
}

func connect(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	return c
}

// databaseURL is the server's URL pointed at database name.
func databaseURL(t testing.TB, name string) string {
	t.Helper()
	u, err := scratch.WithDatabase(ServerURL(t), name)
	if err != nil {
		t.Fatalf("URL of database %s: %v", name, err)
	}
	return u
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// As returns the URL of this database for a new login role that is a member
// of group (mneme_app, mneme_worker, mneme_admin): what an application, the
// sidecar or an operator connects as. The role is dropped after the test.
func (d *DB) As(t testing.TB, group string) string {
	t.Helper()
	return d.AsWith(t, group)
}

// AsWith is As with role attributes added to LOGIN, e.g. "REPLICATION" for
// a sidecar that follows the jobs publication.
func (d *DB) AsWith(t testing.TB, group string, attributes ...string) string {
	t.Helper()
	ctx := context.Background()
	role := strings.TrimPrefix(group, "mneme_") + "_" + randHex(6)
	c := connect(t, ServerURL(t))
	defer c.Close(ctx)
	attrs := strings.Join(append([]string{"LOGIN"}, attributes...), " ")
	if _, err := c.Exec(ctx, fmt.Sprintf(`CREATE ROLE %s %s IN ROLE %s`, role, attrs, group)); err != nil {
		t.Fatalf("create role %s: %v", role, err)
	}
	t.Cleanup(func() {
		c := connect(t, ServerURL(t))
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, role)
		if _, err := c.Exec(ctx, fmt.Sprintf(`DROP ROLE IF EXISTS %s`, role)); err != nil {
			t.Logf("drop role %s: %v", role, err)
		}
	})
	u, err := url.Parse(d.URL)
	if err != nil {
		t.Fatalf("parse %s: %v", d.URL, err)
	}
	u.User = url.User(role)
	return u.String()
}

// PoolAs opens a pool on this database as a new login role of group (see
// AsWith), closed after the test, and returns it with its URL.
func (d *DB) PoolAs(t testing.TB, group string, attributes ...string) (*pgxpool.Pool, string) {
	t.Helper()
	u := d.AsWith(t, group, attributes...)
	pool, err := pgxpool.New(context.Background(), u)
	if err != nil {
		t.Fatalf("pool as %s: %v", group, err)
	}
	t.Cleanup(pool.Close)
	return pool, u
}

// PgBouncer starts a PgBouncer (pool_mode transaction, default_pool_size
// 1: one server connection per database and login) in front of the test
// server, admitting logins (the roles of As URLs, or "postgres"), and stops
// it after the test. Its URL method turns a URL of the server into one of
// the pool. auth_type is trust: the server must admit these logins from
// loopback without a password, as the private cluster does (an external
// DATABASE_URL that needs passwords is not supported). docs/clients.md
// says what works through it.
func PgBouncer(t testing.TB, logins ...string) *cluster.PgBouncer {
	t.Helper()
	u, err := url.Parse(ServerURL(t))
	if err != nil {
		t.Fatalf("parse server URL: %v", err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatalf("server URL %s: no port: %v", ServerURL(t), err)
	}
	b, err := cluster.StartPgBouncer(context.Background(), cluster.PgBouncerOptions{
		ServerHost: u.Hostname(), ServerPort: port, Users: logins,
	})
	if err != nil {
		t.Fatalf("pgbouncer: %v", err)
	}
	t.Cleanup(func() { _ = b.Stop() })
	return b
}
