package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
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
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/llm"
	"github.com/mneme-memory/mneme/sidecar/locomo"
	"github.com/mneme-memory/mneme/sidecar/migrate"
	"github.com/mneme-memory/mneme/sidecar/pipeline"
)

func init() {
	evalCommands["locomo"] = command{"evidence recall on LoCoMo at a context budget, beside baselines", cmdEvalLocomo}
}

// settingFlags collects repeated --set key=json flags.
type settingFlags []string

func (s *settingFlags) String() string     { return strings.Join(*s, ",") }
func (s *settingFlags) Set(v string) error { *s = append(*s, v); return nil }

func cmdEvalLocomo(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flag.NewFlagSet("eval locomo", flag.ContinueOnError)
	data := fs.String("data", "../shared/data/locomo/locomo-dev.json", "LoCoMo JSON file (locomo10.json or a subset)")
	budget := fs.Int("budget", 1000, "context budget in words of the per-category table (200, 500, 1000 and 2000 are always reported)")
	asJSON := fs.Bool("json", false, "print one JSON object instead of the tables")
	plot := fs.String("plot", "", "write an SVG plot of recall against budget to this file")
	limit := fs.Int("limit", 0, "evaluate only the first N conversations (0: all)")
	keep := fs.Bool("keep-db", false, "keep the scratch database afterwards (its URL is logged)")
	quiet := fs.Bool("quiet", false, "no progress bars")
	count := fs.String("count", locomo.CountContent, "what of a memory fills the budget: content (its transcript) or memory_text (title, summary and content, as indexed)")
	agent := fs.Int("agent-k", 0, "simulate a live agent: mneme.retrieve with k memories for every turn during ingest, reviewed by the pipeline (0: no retrievals, no reviews)")
	asOf := fs.String("as-of", "last", `the time mneme.search evaluates retrievability at: "last" (each conversation's last turn, when a live agent would be asked) or an RFC 3339 time`)
	var sets settingFlags
	fs.Var(&sets, "set", "mneme setting for the run, key=JSON (repeatable), e.g. --set segment_max_messages=20")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if *budget <= 0 {
		return fmt.Errorf("%w: --budget must be a positive number of words", errUsage)
	}
	overrides := map[string]json.RawMessage{}
	for _, s := range sets {
		k, v, ok := strings.Cut(s, "=")
		if !ok || !json.Valid([]byte(v)) {
			return fmt.Errorf("%w: --set %q: want key=JSON, e.g. segment_max_messages=20 or embedder='\"hash\"'", errUsage, s)
		}
		overrides[strings.TrimSpace(k)] = json.RawMessage(v)
	}

	convs, err := locomo.Load(*data)
	if err != nil {
		return err
	}
	if *limit > 0 && *limit < len(convs) {
		convs = convs[:*limit]
	}
	cfg, err := config.Load(false)
	if err != nil {
		return err
	}

	pool, cleanup, err := openScratch(ctx, log, cfg, *keep)
	if err != nil {
		return err
	}
	defer cleanup()
	for k, v := range overrides {
		if _, err := pool.Exec(ctx, `SELECT mneme.set_setting($1, $2::jsonb)`, k, string(v)); err != nil {
			return fmt.Errorf("--set %s: %w", k, err)
		}
	}

	var asOfTime time.Time
	if *asOf != "last" {
		if asOfTime, err = time.Parse(time.RFC3339, *asOf); err != nil {
			return fmt.Errorf("%w: --as-of %q: want last or an RFC 3339 time, e.g. 2026-01-01T00:00:00Z", errUsage, *asOf)
		}
	}
	if *agent < 0 || *agent > 100 {
		return fmt.Errorf("%w: --agent-k must be 0 (off) to 100", errUsage)
	}
	if *count != locomo.CountContent && *count != locomo.CountMemoryText {
		return fmt.Errorf("%w: --count must be %s or %s", errUsage, locomo.CountContent, locomo.CountMemoryText)
	}
	runOpts := locomo.Options{Headline: *budget, Data: filepath.Base(*data), Count: *count, AgentK: *agent, AsOf: asOfTime}
	if !*quiet {
		runOpts.Progress = os.Stderr
	}
	var dim int
	if err := pool.QueryRow(ctx, `SELECT (mneme.setting('embedding_dim') #>> '{}')::int`).Scan(&dim); err != nil {
		return fmt.Errorf("read embedding_dim: %w", err)
	}
	// Offline by default: the heuristic segmenter and the built-in hash
	// embedder (SQL embeds memories and queries). A configured LLM segments;
	// a configured embedder embeds memories (pipeline) and questions (here).
	// The pipeline logs every episode at info: only warnings here, so the
	// progress bars stay readable.
	pipeLog := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	deps := pipeline.Deps{Embedder: embed.NewHash(dim), Log: pipeLog}
	mode := "offline"
	if cfg.Embed.Configured() {
		e := embed.NewOpenAI(cfg.Embed, dim)
		deps.Embedder, runOpts.Embed = e, e
		if _, err := pool.Exec(ctx, `SELECT mneme.set_setting('embedder', '"external"')`); err != nil {
			return fmt.Errorf("set embedder: %w", err)
		}
		mode = "embedder " + cfg.Embed.Model
	}
	if cfg.LLM.Configured() {
		deps.LLM = llm.New(cfg.LLM, cfg.LLMTimeout)
		mode += ", LLM " + cfg.LLM.Model
	}
	runOpts.Mode = mode
	if runOpts.Jobs, err = locomo.PipelineJobs(pool, deps); err != nil {
		return err
	}
	rep, err := locomo.Run(ctx, pool, convs, runOpts)
	if err != nil {
		return err
	}
	if *plot != "" {
		f, err := os.Create(*plot)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		title := "LoCoMo evidence recall, " + rep.Data + ", " + rep.Mode
		if err := rep.WritePlot(f, title); err != nil {
			f.Close()
			return fmt.Errorf("plot: %w", err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
	}
	if *asJSON {
		return rep.WriteJSON(os.Stdout)
	}
	return rep.WriteTable(os.Stdout)
}

// scratchDatabase creates a fresh database for the run, on the server of
// DATABASE_URL or on a private cluster in a temporary directory, so the
// numbers start from the same empty state every time and nothing of the
// evaluation lands in a real database. cleanup drops it (and stops the
// private cluster) unless keep is set.
// openScratch creates a scratch database (scratchDatabase), migrates it
// with the environment's embedding layout and connects a pool to it. cleanup
// closes the pool and drops the database (or keeps it, with keep).
func openScratch(ctx context.Context, log *slog.Logger, cfg config.Config, keep bool) (*pgxpool.Pool, func(), error) {
	dsn, drop, err := scratchDatabase(ctx, log, cfg, keep)
	if err != nil {
		return nil, nil, err
	}
	if _, err := migrate.Run(ctx, dsn, migrate.Options{Vector: cfg.Vector, EmbedDim: cfg.MigrateEmbedDim()}); err != nil {
		drop()
		return nil, nil, fmt.Errorf("migrate the scratch database: %w", err)
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		drop()
		return nil, nil, fmt.Errorf("connect to the scratch database: %w", err)
	}
	return pool, func() { pool.Close(); drop() }, nil
}

func scratchDatabase(ctx context.Context, log *slog.Logger, cfg config.Config, keep bool) (dsn string, cleanup func(), err error) {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "mneme_eval_" + hex.EncodeToString(b)
	server := cfg.DatabaseURL
	stop := func() {}
	if server == "" {
		dir, err := os.MkdirTemp("", "mneme-eval-pg-")
		if err != nil {
			return "", nil, err
		}
		_ = os.Chmod(dir, 0o755)
		log.Info("no DATABASE_URL: starting a private PostgreSQL", "dir", dir)
		c, err := cluster.Start(ctx, filepath.Join(dir, "data"), cluster.Options{Disposable: true})
		if err != nil {
			return "", nil, fmt.Errorf("private PostgreSQL: %w", err)
		}
		server = c.URL("postgres")
		stop = func() {
			if keep {
				log.Info("private PostgreSQL left running", "dir", c.Dir, "url", c.URL(name))
				return
			}
			sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = c.Stop(sctx)
			_ = os.RemoveAll(dir)
		}
	}
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("connect to %s: %w", redact(server), err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close(ctx)
		stop()
		return "", nil, fmt.Errorf("create scratch database %s: %w (the evaluation needs CREATEDB on the server of DATABASE_URL)", name, err)
	}
	dsn, err = withDatabase(server, name)
	if err != nil {
		admin.Close(ctx)
		stop()
		return "", nil, err
	}
	cleanup = func() {
		defer stop()
		defer admin.Close(context.Background())
		if keep {
			log.Info("scratch database kept", "url", redact(dsn))
			return
		}
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := admin.Exec(dctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			log.Warn("drop scratch database", "name", name, "err", err)
		}
	}
	return dsn, cleanup, nil
}

// withDatabase points a URL or keyword/value connection string at another
// database.
func withDatabase(dsn, name string) (string, error) {
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

// redact hides a password in a URL for logs.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return dsn
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxx")
	}
	return u.String()
}
