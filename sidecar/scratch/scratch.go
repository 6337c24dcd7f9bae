// Package scratch gives benchmarks and evaluations a database of their own:
// a fresh database created on the server of DATABASE_URL (or on a private
// cluster in a temporary directory when none is set), migrated, and dropped
// afterwards unless kept. Numbers then start from the same empty state every
// time and nothing of a run lands in a real database.
package scratch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/cluster"
	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/migrate"
)

// Options choose where and how.
type Options struct {
	// Server is the URL of a database on the server to create the scratch
	// database on; "" starts a private cluster (needs PostgreSQL binaries).
	Server string
	// Prefix names the database: Prefix + 8 hex digits.
	Prefix string
	// Keep leaves the database (and a private cluster) behind; the log says
	// where.
	Keep bool
	// Citus: Server is a database of a Citus coordinator whose workers are
	// registered there (pg_dist_node). The scratch database is created on
	// the coordinator and on every worker with the citus extension, the
	// workers are registered in it, Open migrates it with --citus, and it
	// is dropped on every node (docs/scale.md).
	Citus bool
	// Template names a database to copy (CREATE DATABASE ... TEMPLATE; no
	// session may be connected to it); "" creates an empty one.
	Template string
	// Migrate is the layout of the migration (Open only).
	Migrate migrate.Options
	Log     *slog.Logger
}

// ForEval are the options of an evaluation's scratch database: on the
// server of cfg.DatabaseURL (else a private cluster), named mneme_eval_*,
// migrated with cfg's vector layout (MNEME_VECTOR, MNEME_EMBED_DIM); a nil
// log discards.
func ForEval(cfg config.Config, keep bool, log *slog.Logger) Options {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return Options{Server: cfg.DatabaseURL, Prefix: "mneme_eval_", Keep: keep, Log: log,
		Migrate: migrate.Options{Vector: cfg.Vector, EmbedDim: cfg.MigrateEmbedDim()}}
}

// DB is a scratch database.
type DB struct {
	Name string
	URL  string
	// Pool is connected by Open; nil after Create.
	Pool *pgxpool.Pool
	drop func()
}

// Close closes the pool and drops the database (or keeps it).
func (d *DB) Close() {
	if d.Pool != nil {
		d.Pool.Close()
	}
	d.drop()
}

// Open creates a scratch database, migrates it and connects a pool.
func Open(ctx context.Context, opts Options) (*DB, error) {
	d, err := Create(ctx, opts)
	if err != nil {
		return nil, err
	}
	mo := opts.Migrate
	mo.Citus = mo.Citus || opts.Citus
	if _, err := migrate.Run(ctx, d.URL, mo); err != nil {
		d.Close()
		return nil, fmt.Errorf("migrate the scratch database: %w", err)
	}
	if d.Pool, err = pgxpool.New(ctx, d.URL); err != nil {
		d.Close()
		return nil, fmt.Errorf("connect to the scratch database: %w", err)
	}
	return d, nil
}

// Create creates an empty scratch database.
func Create(ctx context.Context, opts Options) (*DB, error) {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Prefix == "" {
		opts.Prefix = "mneme_scratch_"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := opts.Prefix + hex.EncodeToString(b)
	if opts.Citus {
		return createCitus(ctx, opts, log, name)
	}
	server, stop, err := serverURL(ctx, opts, log, name)
	if err != nil {
		return nil, err
	}
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		stop()
		return nil, fmt.Errorf("connect to %s: %w", config.Redact(server), err)
	}
	create := "CREATE DATABASE " + name
	if opts.Template != "" {
		create += " TEMPLATE " + pgx.Identifier{opts.Template}.Sanitize()
	}
	if _, err := admin.Exec(ctx, create); err != nil {
		admin.Close(ctx)
		stop()
		return nil, fmt.Errorf("create scratch database %s: %w (the run needs CREATEDB on the server of DATABASE_URL)", name, err)
	}
	dsn, err := WithDatabase(server, name)
	if err != nil {
		_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name)
		admin.Close(ctx)
		stop()
		return nil, err
	}
	return &DB{Name: name, URL: dsn, drop: func() {
		defer stop()
		defer admin.Close(context.Background())
		if opts.Keep {
			log.Warn("scratch database kept", "name", name, "url", config.Redact(dsn))
			return
		}
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := admin.Exec(dctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			log.Warn("drop scratch database", "name", name, "err", err)
		}
	}}, nil
}

// serverURL is opts.Server, or a private cluster started for the run.
func serverURL(ctx context.Context, opts Options, log *slog.Logger, name string) (string, func(), error) {
	if opts.Server != "" {
		return opts.Server, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "mneme-scratch-pg-")
	if err != nil {
		return "", nil, err
	}
	_ = os.Chmod(dir, 0o755)
	log.Info("no DATABASE_URL: starting a private PostgreSQL", "dir", dir)
	c, err := cluster.Start(ctx, filepath.Join(dir, "data"), cluster.Options{Disposable: true})
	if err != nil {
		return "", nil, fmt.Errorf("private PostgreSQL: %w", err)
	}
	return c.URL("postgres"), func() {
		if opts.Keep {
			log.Warn("private PostgreSQL left running", "dir", c.Dir, "url", c.URL(name))
			return
		}
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.Stop(sctx)
		_ = os.RemoveAll(dir)
	}, nil
}

// Existing is server's URL pointed at the existing database name, checked by
// connecting to it (re-measuring a kept database).
func Existing(ctx context.Context, server, name string) (string, error) {
	dsn, err := WithDatabase(server, name)
	if err != nil {
		return "", err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", fmt.Errorf("connect to %s: %w", name, err)
	}
	conn.Close(ctx)
	return dsn, nil
}

// WithDatabase points a URL or keyword/value connection string at another
// database.
func WithDatabase(dsn, name string) (string, error) {
	if strings.Contains(dsn, "://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("DATABASE_URL: %w", err)
		}
		u.Path = "/" + name
		return u.String(), nil
	}
	return dsn + " dbname=" + name, nil
}
