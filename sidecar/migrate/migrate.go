// Package migrate brings a database to mneme's current schema: the goose
// migrations embedded from goose/ (tables, applied once each, under a
// Postgres session lock so concurrent migrates are safe), then the
// idempotent SQL layer embedded from sql/ (functions and views, re-applied
// every time under a transaction-scoped advisory lock).
package migrate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/pressly/goose/v3/lock"

	migrations "github.com/mneme-memory/mneme/goose"
	sqlfiles "github.com/mneme-memory/mneme/sql"
)

// VersionTable is goose's bookkeeping table.
const VersionTable = "mneme_goose_version"

// sqlLockKey serialises re-application of the idempotent layer.
const sqlLockKey = 0x6d6e656d65 // "mneme"

// Options choose the migrate-time embedding layout. They only matter for the
// first migrate of a database; afterwards they must match what is there.
type Options struct {
	Vector   string // auto | pgvector | array ("" = auto)
	EmbedDim int    // 0 = default (256) on first migrate, don't check later
	// Citus distributes the tables on a Citus coordinator (sql/citus,
	// docs/scale.md): once, after the goose migrations; later migrates of a
	// distributed database keep it so with or without the flag.
	Citus  bool
	Logger *slog.Logger
}

// Result says what a migrate did.
type Result struct {
	Applied  []int64 // goose versions applied now
	SQLFiles []string
	Variant  string // pgvector | array
	Dim      int
	// Citus is the version of the citus extension in the database, "" when
	// there is none. Without Options.Citus the tables stay local to the
	// coordinator, and migrate says so.
	Citus string
	// Distributed: the tables are distributed by Citus (now or before).
	Distributed bool
}

// ErrLayoutMismatch means the database was migrated with another embedding
// variant or dimension than requested.
var ErrLayoutMismatch = errors.New("embedding layout differs from the database's")

// Run migrates the database at dsn.
func Run(ctx context.Context, dsn string, opts Options) (Result, error) {
	var res Result
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	switch opts.Vector {
	case "", "auto", "pgvector", "array":
	default:
		return res, fmt.Errorf("vector variant %q: use auto, pgvector or array", opts.Vector)
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return res, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return res, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	vector, err := vectorChoice(ctx, conn, cfg.User, opts.Vector)
	if err != nil {
		return res, err
	}
	if vector != opts.Vector && opts.Vector != "" {
		log.Warn("pgvector is installed on the server but this role cannot create the extension in this database: "+
			"the array variant (exact cosine in SQL) is used", "fix", "an admin runs CREATE EXTENSION vector in the database before the first migrate")
	}
	if vector != "" {
		cfg.RuntimeParams["mneme.vector"] = vector
	}
	if opts.EmbedDim > 0 {
		cfg.RuntimeParams["mneme.embedding_dim"] = strconv.Itoa(opts.EmbedDim)
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()

	if res.Applied, err = gooseUp(ctx, db); err != nil {
		return res, err
	}
	for _, v := range res.Applied {
		log.Info("applied migration", "version", v)
	}

	if res.Variant, res.Dim, err = layout(ctx, conn); err != nil {
		return res, err
	}
	if opts.EmbedDim > 0 && opts.EmbedDim != res.Dim {
		return res, fmt.Errorf("%w: asked for dimension %d, the database has %d (fixed at first migrate; re-embed to change it)",
			ErrLayoutMismatch, opts.EmbedDim, res.Dim)
	}
	if opts.Vector == "pgvector" || opts.Vector == "array" {
		if opts.Vector != res.Variant {
			return res, fmt.Errorf("%w: asked for %s, the database uses %s", ErrLayoutMismatch, opts.Vector, res.Variant)
		}
	}
	if err := conn.QueryRow(ctx, `SELECT coalesce((SELECT extversion FROM pg_extension WHERE extname = 'citus'), '')`).
		Scan(&res.Citus); err != nil {
		return res, fmt.Errorf("look for citus: %w", err)
	}
	if res.Citus != "" {
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = 'mneme.memories'::regclass)`).
			Scan(&res.Distributed); err != nil {
			return res, fmt.Errorf("look for citus: %w", err)
		}
	}
	if opts.Citus && res.Citus == "" {
		return res, errors.New("--citus: the citus extension is not installed in this database " +
			"(a superuser runs CREATE EXTENSION citus in it on the coordinator, with the workers added; docs/scale.md)")
	}
	if opts.Citus && !res.Distributed {
		if err := retryCatalog(ctx, func() error { return distribute(ctx, conn) }); err != nil {
			return res, err
		}
		res.Distributed = true
		log.Info("distributed the tables by conversation (Citus)", "citus", res.Citus)
	}
	if res.Distributed {
		// Tables made by goose migrations since the tables were distributed.
		if _, err := conn.Exec(ctx, citusNewTables); err != nil {
			return res, fmt.Errorf("citus: distribute the tables made since --citus: %w", err)
		}
	}
	err = retryCatalog(ctx, func() error {
		var err error
		res.SQLFiles, err = applySQL(ctx, conn, res.Variant, res.Distributed)
		return err
	})
	if err != nil {
		return res, err
	}
	if res.Distributed {
		if err := onWorkers(ctx, conn); err != nil {
			return res, err
		}
	}
	log.Info("migrated", "goose_applied", len(res.Applied), "sql_files", len(res.SQLFiles),
		"vector", res.Variant, "dim", res.Dim)
	if res.Citus != "" && !res.Distributed {
		log.Warn("citus is installed in this database: mneme's tables stay local to this node, nothing is distributed "+
			"(mneme migrate --citus distributes them; docs/scale.md)", "citus", res.Citus)
	}
	return res, nil
}

// onWorkers runs sql/citus/workers.sql after the migrate's transaction:
// what Citus does not propagate, made on every worker; an error names the
// worker that refused.
func onWorkers(ctx context.Context, conn *pgx.Conn) error {
	body, err := fs.ReadFile(sqlfiles.Citus, "citus/workers.sql")
	if err != nil {
		return err
	}
	rows, err := conn.Query(ctx, string(body))
	if err != nil {
		return fmt.Errorf("sql/citus/workers.sql: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var host, result string
		var port int
		var ok bool
		if err := rows.Scan(&host, &port, &ok, &result); err != nil {
			return fmt.Errorf("sql/citus/workers.sql: %w", err)
		}
		if !ok {
			return fmt.Errorf("sql/citus/workers.sql on worker %s:%d: %s", host, port, result)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sql/citus/workers.sql: %w", err)
	}
	return nil
}

// distribute runs sql/citus/distribute.sql in one transaction: every table
// distributed by conversation or a reference table.
func distribute(ctx context.Context, conn *pgx.Conn) error {
	body, err := fs.ReadFile(sqlfiles.Citus, "citus/distribute.sql")
	if err != nil {
		return err
	}
	tx, err := beginLocked(ctx, conn, true)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit this is a no-op
	if err := execScript(ctx, tx, "sql/citus/distribute.sql", string(body), true); err != nil {
		return fmt.Errorf("distribute with citus: %w", err)
	}
	return tx.Commit(ctx)
}

// beginLocked opens the transaction that changes the SQL layer, holding the
// lock that serialises migrates. On Citus it lets the tables' row triggers
// (tenant stamping, initial state, the hash embedding) be created and run
// on the shards; sql/110 and sql/420 put row triggers where one server has
// statement triggers.
func beginLocked(ctx context.Context, conn *pgx.Conn, citus bool) (pgx.Tx, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(sqlLockKey)); err != nil {
		_ = tx.Rollback(ctx)
		return nil, fmt.Errorf("lock: %w", err)
	}
	if citus {
		if _, err := tx.Exec(ctx, `SET LOCAL citus.enable_unsafe_triggers = on`); err != nil {
			_ = tx.Rollback(ctx)
			return nil, fmt.Errorf("citus: %w", err)
		}
	}
	return tx, nil
}

// execScript runs a SQL script in tx: whole, or on Citus one statement at a
// time (Citus sends a DDL command's text to the workers, and refuses a text
// that holds several).
func execScript(ctx context.Context, tx pgx.Tx, file, script string, citus bool) error {
	if !citus {
		if _, err := tx.Exec(ctx, script); err != nil {
			return fmt.Errorf("apply %s: %w", file, err)
		}
		return nil
	}
	for _, stmt := range statements(script) {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("apply %s: %w\nin: %s", file, err, firstLine(stmt))
		}
	}
	return nil
}

var dollarTag = regexp.MustCompile(`\$[A-Za-z_]*\$`)

// statements splits a SQL script at the semicolons that end a line outside
// dollar quotes; comment lines are left out.
func statements(script string) []string {
	var out []string
	var cur strings.Builder
	quote := "" // the open dollar-quote tag, if any
	for _, line := range strings.Split(script, "\n") {
		trimmed := strings.TrimSpace(line)
		if quote == "" && (trimmed == "" || strings.HasPrefix(trimmed, "--")) {
			continue
		}
		for _, tag := range dollarTag.FindAllString(line, -1) {
			switch quote {
			case "":
				quote = tag
			case tag:
				quote = ""
			}
		}
		cur.WriteString(line)
		cur.WriteString("\n")
		if quote == "" && strings.HasSuffix(trimmed, ";") {
			out = append(out, cur.String())
			cur.Reset()
		}
	}
	if strings.TrimSpace(cur.String()) != "" {
		out = append(out, cur.String())
	}
	return out
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// vectorChoice is the variant a first migrate may take. pgvector is not a
// trusted extension: a role that is neither a superuser nor able to create
// it finds it available but cannot CREATE EXTENSION. With auto such a role
// gets the array variant (logged); with pgvector it gets an error saying
// what an admin runs. Once the layout exists (or the extension was created
// by an admin) the request is passed on as it is.
func vectorChoice(ctx context.Context, conn *pgx.Conn, user, want string) (string, error) {
	if want == "array" {
		return want, nil
	}
	var available, created, laidOut, canCreate bool
	err := conn.QueryRow(ctx, `SELECT
		EXISTS (SELECT 1 FROM pg_catalog.pg_available_extensions WHERE name = 'vector'),
		EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'vector'),
		to_regclass('mneme.settings') IS NOT NULL
			AND EXISTS (SELECT 1 FROM pg_catalog.pg_attribute WHERE attrelid = to_regclass('mneme.memories') AND attname = 'embedding'),
		(SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user)
			OR (coalesce((SELECT bool_or(trusted) FROM pg_catalog.pg_available_extension_versions WHERE name = 'vector'), false)
			    AND has_database_privilege(current_database(), 'CREATE'))`).Scan(&available, &created, &laidOut, &canCreate)
	if err != nil {
		return "", fmt.Errorf("check the vector extension: %w", err)
	}
	if !available || created || laidOut || canCreate {
		return want, nil
	}
	if want == "pgvector" {
		return "", fmt.Errorf("MNEME_VECTOR=pgvector, but role %q may not create the vector extension in this database "+
			"(pgvector is not a trusted extension): an admin runs CREATE EXTENSION vector in it once, "+
			"or use MNEME_VECTOR=auto or array", user)
	}
	return "array", nil
}

func gooseUp(ctx context.Context, db *sql.DB) ([]int64, error) {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, fmt.Errorf("session locker: %w", err)
	}
	store, err := database.NewStore(database.DialectPostgres, VersionTable)
	if err != nil {
		return nil, fmt.Errorf("goose store: %w", err)
	}
	opts := []goose.ProviderOption{
		goose.WithStore(store), goose.WithSessionLocker(locker), goose.WithDisableGlobalRegistry(true),
		// Migration numbers are grouped by area, so a lower-numbered file can
		// arrive after a higher one was applied; each is still applied once.
		goose.WithAllowOutofOrder(true)}
	distributed, err := distributedNow(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("look for citus: %w", err)
	}
	if distributed {
		versions, ms := citusGooseMigrations()
		opts = append(opts, goose.WithExcludeVersions(versions), goose.WithGoMigrations(ms...))
	}
	p, err := goose.NewProvider("", db, migrations.FS, opts...)
	if err != nil {
		return nil, fmt.Errorf("goose provider: %w", err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("goose up: %w", err)
	}
	var applied []int64
	for _, r := range results {
		applied = append(applied, r.Source.Version)
	}
	return applied, nil
}

func layout(ctx context.Context, conn *pgx.Conn) (variant string, dim int, err error) {
	err = conn.QueryRow(ctx, `SELECT (SELECT value #>> '{}' FROM mneme.settings WHERE key = 'vector_variant'),
	                                 (SELECT (value #>> '{}')::int FROM mneme.settings WHERE key = 'embedding_dim')`).
		Scan(&variant, &dim)
	if err != nil {
		return "", 0, fmt.Errorf("read embedding layout: %w", err)
	}
	return variant, dim, nil
}

// applySQL re-applies every sql/*.sql file in name order in one transaction,
// then on a distributed mneme the Citus layer, sql/citus/NNN-*.sql.
func applySQL(ctx context.Context, conn *pgx.Conn, variant string, distributed bool) ([]string, error) {
	names, err := fs.Glob(sqlfiles.FS, "*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	extSchema := "mneme"
	if variant == "pgvector" {
		if err := conn.QueryRow(ctx, `SELECT n.nspname FROM pg_extension e
			JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'`).Scan(&extSchema); err != nil {
			return nil, fmt.Errorf("find the vector extension's schema: %w", err)
		}
	}
	tx, err := beginLocked(ctx, conn, distributed)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit this is a no-op
	apply := func(files fs.FS, name string) error {
		body, err := fs.ReadFile(files, name)
		if err != nil {
			return err
		}
		text := strings.ReplaceAll(string(body), "@extschema@", pgx.Identifier{extSchema}.Sanitize())
		return execScript(ctx, tx, "sql/"+name, text, distributed)
	}
	for _, name := range names {
		if err := apply(sqlfiles.FS, name); err != nil {
			return nil, err
		}
	}
	if distributed {
		// The Citus layer (sql/citus/NNN-*.sql): the functions Citus runs in
		// another form, each replacing the one-server function by name.
		layer, err := fs.Glob(sqlfiles.CitusLayer, "citus/*.sql")
		if err != nil {
			return nil, err
		}
		sort.Strings(layer)
		for _, name := range layer {
			if err := apply(sqlfiles.CitusLayer, name); err != nil {
				return nil, err
			}
		}
		names = append(names, layer...)
	}
	return names, tx.Commit(ctx)
}
