package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mneme-memory/mneme/sidecar/migrate"
	"github.com/mneme-memory/mneme/sidecar/scratch"
)

// EraseOptions configure mneme bench erase.
type EraseOptions struct {
	Server       string
	Memories     int // in the tenant
	Conversation int // memories of the conversation erased whole
	Reviews      int // review log rows of the tenant
	Jobs         int // done review jobs of the tenant
	Erases       int // single erases timed
	Vector       string
	Keep         bool   // keep the loaded database untouched (the erases run on a copy)
	Reuse        string // time the erases on a copy of this kept database instead of loading one
	Log          *slog.Logger
}

// Bind binds mneme bench erase's flags; it returns --json.
func (o *EraseOptions) Bind(fs *flag.FlagSet) *bool {
	fs.IntVar(&o.Memories, "memories", 100000, "memories in the tenant")
	fs.IntVar(&o.Conversation, "conversation", 10000, "memories of the conversation erase_conversation takes (part of --memories)")
	fs.IntVar(&o.Reviews, "reviews", 200000, "review log rows in the tenant")
	fs.IntVar(&o.Jobs, "jobs", 100000, "done review jobs in the tenant (their payloads name memories and quote queries)")
	fs.IntVar(&o.Erases, "erases", 30, "single-memory erases timed (p50, p95)")
	fs.StringVar(&o.Vector, "vector", "auto", "embedding variant: auto, pgvector or array")
	fs.BoolVar(&o.Keep, "keep", false, "keep the loaded database untouched (its name is logged) and time the erases on a copy of it")
	fs.StringVar(&o.Reuse, "reuse", "", "time the erases on a copy of a database kept by --keep (migrated by this binary), not on a new load")
	return fs.Bool("json", false, "print one JSON object")
}

// Validate checks the bound flags.
func (o *EraseOptions) Validate() error {
	if o.Memories < 200 || o.Conversation < 1 || o.Conversation > o.Memories/2 {
		return errors.New("need --memories >= 200 and 1 <= --conversation <= memories/2")
	}
	if o.Keep && o.Reuse != "" {
		return errors.New("--keep and --reuse exclude each other")
	}
	if o.Reviews < 0 || o.Jobs < 0 || o.Erases < 1 {
		return errors.New("need --reviews >= 0, --jobs >= 0, --erases >= 1")
	}
	return validVector(o.Vector)
}

// EraseResult is one run: the tenant's size, the single erases'
// latencies, and erase_conversation's time.
type EraseResult struct {
	Variant                 string    `json:"variant"`
	Memories                int       `json:"memories"`
	Conversation            int       `json:"conversation_memories"`
	Reviews                 int       `json:"reviews"`
	Jobs                    int       `json:"jobs"`
	LoadSeconds             float64   `json:"load_seconds"`
	Erase                   Latencies `json:"erase_ms"`
	EraseConversationSecond float64   `json:"erase_conversation_seconds"`
}

// Erase loads one tenant (memories in conversations of 100, one
// conversation of --conversation memories, review log rows naming its
// memories and quoting two queries each, one of its own and one of 1,000
// shared ones, done review jobs whose payloads name a memory and quote a
// query of their own)
// straight into a scratch database, then times mneme.erase of single
// memories outside the big conversation and mneme.erase_conversation of
// the big one, each in its own transaction. With --keep the loaded
// database stays as it was loaded and the erases run on a copy of it;
// --reuse times them on a new copy of such a database (migrated by this
// binary), so a before and an after share one load.
func Erase(ctx context.Context, o EraseOptions) (EraseResult, error) {
	res := EraseResult{Memories: o.Memories, Conversation: o.Conversation, Reviews: o.Reviews, Jobs: o.Jobs}
	src := o.Reuse
	if src == "" {
		db, err := scratch.Open(ctx, scratch.Options{Server: o.Server, Prefix: "mneme_bench_", Keep: o.Keep, Log: o.Log,
			Migrate: migrate.Options{Vector: o.Vector}})
		if err != nil {
			return res, err
		}
		defer db.Close()
		big := uuid.New()
		if err := loadErase(ctx, db, o, big, &res); err != nil {
			return res, err
		}
		if !o.Keep {
			return res, timeErases(ctx, db, o, big, &res)
		}
		src = db.Name
		db.Pool.Close()
		db.Pool = nil
	}
	cp, err := scratch.Open(ctx, scratch.Options{Server: o.Server, Prefix: "mneme_bench_", Template: src, Log: o.Log,
		Migrate: migrate.Options{Vector: o.Vector}})
	if err != nil {
		return res, fmt.Errorf("copy %s: %w", src, err)
	}
	defer cp.Close()
	if o.Log != nil {
		o.Log.Info("bench erase: erasing in a copy", "of", src, "copy", cp.Name)
	}
	// a migration of this binary may have added tables: plan on statistics
	if _, err := cp.Pool.Exec(ctx, `ANALYZE`); err != nil {
		return res, err
	}
	var big uuid.UUID
	if err := cp.Pool.QueryRow(ctx, `SELECT conversation_id, sum(count(*)) OVER (), count(*),
			(SELECT count(*) FROM mneme.review_log), (SELECT count(*) FROM mneme.jobs)
		FROM mneme.memories GROUP BY 1 ORDER BY count(*) DESC LIMIT 1`).Scan(&big, &res.Memories, &res.Conversation, &res.Reviews, &res.Jobs); err != nil {
		return res, fmt.Errorf("read the copy's size: %w", err)
	}
	if err := cp.Pool.QueryRow(ctx, `SELECT mneme.setting('vector_variant') #>> '{}'`).Scan(&res.Variant); err != nil {
		return res, err
	}
	return res, timeErases(ctx, cp, o, big, &res)
}

// loadErase loads the tenant of Erase into db.
func loadErase(ctx context.Context, db *scratch.DB, o EraseOptions, big uuid.UUID, res *EraseResult) error {
	if err := db.Pool.QueryRow(ctx, `SELECT mneme.setting('vector_variant') #>> '{}'`).Scan(&res.Variant); err != nil {
		return err
	}
	t0 := time.Now()
	for _, step := range []struct{ what, sql string }{
		{"tenant", `SELECT mneme.create_tenant('bench')`},
		{"conversations", `INSERT INTO mneme.message_queue (id, tenant_id)
			SELECT $1::uuid, 'bench' UNION ALL
			SELECT gen_random_uuid(), 'bench' FROM generate_series(1, ceil(($2::int - $3::int) / 100.0)::int)`},
		// embeddings given (one unit vector for all): the built-in embedder's
		// trigger would take most of the load's time otherwise
		{"memories", `WITH c AS (SELECT array_agg(id ORDER BY id) AS ids FROM mneme.message_queue WHERE id <> $1::uuid)
			INSERT INTO mneme.memories (conversation_id, tenant_id, kind, content, stability, difficulty, fsrs_state, label, embedding)
			SELECT CASE WHEN g <= $3 THEN $1::uuid ELSE c.ids[1 + g % cardinality(c.ids)] END, 'bench',
			       'semantic', 'Memory ' || g || ' about topic ' || (g % 997) || ' and the word w' || (g % 113) || '.',
			       30, 5, 'review', 'general',
			       array_fill((1 / sqrt((mneme.setting('embedding_dim') #>> '{}')::int))::real,
			                  ARRAY[(mneme.setting('embedding_dim') #>> '{}')::int])::@extschema@.vector
			FROM generate_series(1, $2) g, c`},
		{"reviews", `WITH m AS (SELECT id, conversation_id, row_number() OVER (ORDER BY id) AS n FROM mneme.memories),
			k AS (SELECT count(*) AS n FROM m)
			INSERT INTO mneme.review_log (memory_id, conversation_id, tenant_id, rating, reviewer, stability_before, stability_after,
			                              difficulty_before, difficulty_after, state_before, state_after, last_reviewed_before,
			                              reviewed_at)
			SELECT m.id, m.conversation_id, 'bench', 'good', 'heuristic', 30, 40, 5, 5, 'review', 'review', now() - interval '2 days',
			       now() - interval '1 day'
			FROM generate_series(1, $4) g JOIN m ON m.n = 1 + g % (SELECT k.n FROM k)`},
		// two queries per review row, as a review job writes them (rows of
		// mneme.review_queries, goose 00310): one of its own, one that
		// about 200 rows share
		{"review queries", `INSERT INTO mneme.review_queries (conversation_id, review_log_id, tenant_id, query_key, query, ord)
			SELECT l.conversation_id, l.id, l.tenant_id, md5(q.x)::uuid, q.x, q.o
			FROM (SELECT l.conversation_id, l.id, l.tenant_id, row_number() OVER (ORDER BY l.id) AS g FROM mneme.review_log l) l,
			     unnest(ARRAY['what about item ' || l.g, 'and item ' || (l.g % 1000)]) WITH ORDINALITY AS q(x, o)`},
		{"jobs", `WITH m AS (SELECT id, conversation_id, row_number() OVER (ORDER BY id) AS n FROM mneme.memories),
			k AS (SELECT count(*) AS n FROM m)
			INSERT INTO mneme.jobs (kind, conversation_id, tenant_id, state, payload, finished_at)
			SELECT 'review', m.conversation_id, 'bench', 'done',
			       jsonb_build_object('reviewed_at', '2026-01-01T00:00:00Z',
			                          'reviews', jsonb_build_array(jsonb_build_object('query', 'what about job ' || g,
			                                                                          'memory_ids', jsonb_build_array(m.id)))),
			       now()
			FROM generate_series(1, $5) g JOIN m ON m.n = 1 + g % (SELECT k.n FROM k)`},
		{"analyze", `ANALYZE`},
	} {
		q := step.sql
		if res.Variant == "array" {
			q = strings.ReplaceAll(q, "::@extschema@.vector", "::mneme.embedding")
		} else {
			var schema string
			if err := db.Pool.QueryRow(ctx, `SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'`).Scan(&schema); err != nil {
				return err
			}
			q = strings.ReplaceAll(q, "@extschema@", schema)
		}
		var args []any
		switch step.what {
		case "conversations":
			args = []any{big, o.Memories, o.Conversation}
		case "memories":
			args = []any{big, o.Memories, o.Conversation}
		case "reviews":
			q = strings.ReplaceAll(q, "$4", "$1")
			args = []any{o.Reviews}
		case "jobs":
			q = strings.ReplaceAll(q, "$5", "$1")
			args = []any{o.Jobs}
		}
		t := time.Now()
		if _, err := db.Pool.Exec(ctx, q, args...); err != nil {
			return fmt.Errorf("load %s: %w", step.what, err)
		}
		if o.Log != nil {
			o.Log.Info("bench erase: loaded", "step", step.what, "seconds", time.Since(t).Seconds())
		}
	}
	res.LoadSeconds = time.Since(t0).Seconds()
	return nil
}

// timeErases times the single erases and erase_conversation of big.
func timeErases(ctx context.Context, db *scratch.DB, o EraseOptions, big uuid.UUID, res *EraseResult) error {
	rows, err := db.Pool.Query(ctx, `SELECT id FROM mneme.memories WHERE conversation_id <> $1 ORDER BY md5(id::text) LIMIT $2`, big, o.Erases)
	if err != nil {
		return err
	}
	var ids []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			return err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	var ms []float64
	for _, id := range ids {
		t := time.Now()
		if _, err := db.Pool.Exec(ctx, `SELECT mneme.set_tenant('bench'), mneme.erase($1, 'bench')`, id); err != nil {
			return fmt.Errorf("erase %s: %w", id, err)
		}
		ms = append(ms, float64(time.Since(t).Microseconds())/1000)
	}
	res.Erase = percentiles(ms)
	t := time.Now()
	if _, err := db.Pool.Exec(ctx, `SELECT mneme.set_tenant('bench'), mneme.erase_conversation($1, 'bench')`, big); err != nil {
		return fmt.Errorf("erase_conversation: %w", err)
	}
	res.EraseConversationSecond = time.Since(t).Seconds()
	return nil
}

// WriteTable prints the result.
func (r EraseResult) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "erase in a tenant of %d memories (%s), %d review rows, %d jobs; loaded in %.1f s\n",
		r.Memories, r.Variant, r.Reviews, r.Jobs, r.LoadSeconds)
	fmt.Fprintf(w, "  erase (one memory)            p50 %8.1f ms  p95 %8.1f ms  p99 %8.1f ms\n", r.Erase.P50, r.Erase.P95, r.Erase.P99)
	fmt.Fprintf(w, "  erase_conversation (%6d)    %8.2f s\n", r.Conversation, r.EraseConversationSecond)
}
