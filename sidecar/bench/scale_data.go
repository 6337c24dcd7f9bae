package bench

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/progress"
	"github.com/mneme-memory/mneme/sidecar/scratch"
)

// scaleDatabase creates the benchmark database if it does not exist (or
// drops it first with Fresh) and returns its URL.
func scaleDatabase(ctx context.Context, o ScaleOptions, log *slog.Logger) (string, error) {
	admin, err := pgx.Connect(ctx, o.Server)
	if err != nil {
		return "", fmt.Errorf("connect to %s: %w", config.Redact(o.Server), err)
	}
	defer admin.Close(context.Background())
	ident := pgx.Identifier{o.DB}.Sanitize()
	if o.Fresh {
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			return "", err
		}
	}
	var exists bool
	if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, o.DB).Scan(&exists); err != nil {
		return "", err
	}
	if !exists {
		log.Info("bench scale: creating the benchmark database", "name", o.DB)
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
			return "", fmt.Errorf("create %s: %w", o.DB, err)
		}
	} else {
		log.Info("bench scale: reusing the benchmark database (grown only where a step needs more)", "name", o.DB)
	}
	return scratch.WithDatabase(o.Server, o.DB)
}

// scaleSetup creates the tenants, the conversations' queue rows and the
// timed conversations, once (their vectors the run's: scaleVectors).
func scaleSetup(ctx context.Context, conn *pgx.Conn, o ScaleOptions, vec scaleVectors) error {
	var have int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM mneme.message_queue WHERE id = $1`, probeContext).Scan(&have); err != nil {
		return err
	}
	if have > 0 {
		return nil
	}
	if _, err := conn.Exec(ctx, `SELECT mneme.create_tenant('t' || g) FROM generate_series(0, $1 - 1) g`, o.Tenants); err != nil {
		return fmt.Errorf("create tenants: %w", err)
	}
	ids := make([]string, o.Conversations)
	tenants := make([]string, o.Conversations)
	for i := range ids {
		ids[i], tenants[i] = bulkConv(i).String(), scaleTenantOf(i, o.Tenants)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO mneme.message_queue (id, tenant_id) SELECT * FROM unnest($1::uuid[], $2::text[])`,
		ids, tenants); err != nil {
		return fmt.Errorf("conversations: %w", err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO mneme.message_queue (id, tenant_id) VALUES ($1, $4), ($2, $4), ($3, $4)`,
		probeSmall, probeTypical, probeContext, probeTenant); err != nil {
		return fmt.Errorf("timed conversations: %w", err)
	}
	r := mrand.New(mrand.NewPCG(7, 7))
	vocab := benchVocabulary(mrand.New(mrand.NewPCG(42, 1)))
	zipf := mrand.NewZipf(r, 1.1, 50, uint64(len(vocab)-1))
	text := func(n int) string {
		w := make([]string, n)
		for i := range w {
			w[i] = vocab[zipf.Uint64()]
		}
		return strings.Join(w, " ")
	}
	for _, p := range []struct {
		conv uuid.UUID
		n    int
	}{{probeSmall, probeSmallN}, {probeTypical, probeTypicalN}} {
		for i := 0; i < p.n; i++ {
			t := text(12 + r.IntN(29))
			v, err := vec.EmbedOne(t)
			if err != nil {
				return err
			}
			if _, err := conn.Exec(ctx, `INSERT INTO mneme.memories (conversation_id, content, embedding, created_at, last_reviewed_at)
				VALUES ($1, $2, $3::real[]::mneme.embedding, now(), now())`, p.conv, t, v); err != nil {
				return fmt.Errorf("timed conversation: %w", err)
			}
		}
	}
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for e := 0; e < probeEpisodes; e++ {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			ids := make([]int64, contextMessages)
			var lines []string
			for m := range ids {
				t := text(12 + r.IntN(29))
				role := []string{"user", "assistant"}[m%2]
				at := start.Add(time.Duration(e)*time.Hour + time.Duration(m)*time.Minute)
				if err := tx.QueryRow(ctx, `SELECT mneme.add_message($1, $2, $3, $4)`, probeContext, role, t, at).Scan(&ids[m]); err != nil {
					return err
				}
				lines = append(lines, role+": "+t)
			}
			content := strings.Join(lines, "\n")
			if vec.clustered == nil {
				_, err := tx.Exec(ctx, `SELECT mneme.create_episode($1, $2, $3, $4, mneme.hash_embed($3), 0, 'general', false, 900, 5)`,
					probeContext, ids, content, lines[0])
				return err
			}
			emb, err := vec.EmbedOne(content)
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `SELECT mneme.create_episode($1, $2, $3, $4, $5::real[], 0, 'general', false, 900, 5)`,
				probeContext, ids, content, lines[0], emb)
			return err
		})
		if err != nil {
			return fmt.Errorf("context conversation: %w", err)
		}
	}
	_, err := conn.Exec(ctx, `DELETE FROM mneme.jobs`)
	return err
}

// scaleGrow adds bulk memories until the database holds n (the timed
// conversations included), in chunks: COPY into a staging table, then one
// INSERT per chunk (the BM25 statistics by their statement trigger).
func scaleGrow(ctx context.Context, conn *pgx.Conn, o ScaleOptions, vec scaleVectors, cum []float64, n int) (bool, error) {
	var have int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM mneme.memories`).Scan(&have); err != nil {
		return false, err
	}
	probes := probeSmallN + probeTypicalN + probeEpisodes
	if have >= n {
		return false, nil
	}
	vocab := benchVocabulary(mrand.New(mrand.NewPCG(42, 1)))
	// pgvector: the HNSW index is built after the load, much faster than
	// inserting into it row by row (as bench retrieve does).
	var hnsw string
	if err := conn.QueryRow(ctx, `SELECT coalesce(pg_get_indexdef(to_regclass('mneme.memories_embedding_hnsw')), '')`).Scan(&hnsw); err != nil {
		return false, err
	}
	if hnsw != "" {
		if _, err := conn.Exec(ctx, `DROP INDEX mneme.memories_embedding_hnsw`); err != nil {
			return false, err
		}
	}
	// The per-scope HNSW indexes too: made again after the load
	// (mneme.vector_index_plan, in Scale).
	if _, err := conn.Exec(ctx, `DO $$ DECLARE i text; BEGIN
		FOR i IN SELECT indexname FROM pg_indexes WHERE schemaname = 'mneme' AND indexname ~ '^memories_hnsw_[ct]_' LOOP
			EXECUTE format('DROP INDEX mneme.%I', i);
		END LOOP; END $$`); err != nil {
		return false, fmt.Errorf("drop the per-scope vector indexes: %w", err)
	}
	if _, err := conn.Exec(ctx, `CREATE UNLOGGED TABLE IF NOT EXISTS bench_scale_load
		(conversation_id uuid, content text, embedding real[], created_at timestamptz)`); err != nil {
		return false, err
	}
	bar := progress.New(o.Progress, fmt.Sprintf("grow to %d memories", n), n-have)
	base := time.Now().Add(-time.Duration(n) * time.Second)
	for from := have - probes; from < n-probes; from += scaleChunk {
		to := min(from+scaleChunk, n-probes)
		rows := make([][]any, 0, to-from)
		for j := from; j < to; j++ {
			r := mrand.New(mrand.NewPCG(uint64(j), 99))
			zipf := mrand.NewZipf(r, 1.1, 50, uint64(len(vocab)-1))
			w := make([]string, 12+r.IntN(29))
			for i := range w {
				w[i] = vocab[zipf.Uint64()]
			}
			t := strings.Join(w, " ")
			v, err := vec.EmbedOne(t)
			if err != nil {
				return false, err
			}
			rows = append(rows, []any{bulkConv(convOf(cum, j)), t, v, base.Add(time.Duration(j) * time.Second)})
		}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{"bench_scale_load"}, []string{"conversation_id", "content", "embedding", "created_at"},
			pgx.CopyFromRows(rows)); err != nil {
			return false, fmt.Errorf("copy: %w", err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO mneme.memories (conversation_id, content, embedding, created_at, last_reviewed_at)
			SELECT conversation_id, content, embedding::mneme.embedding, created_at, created_at FROM bench_scale_load`); err != nil {
			return false, fmt.Errorf("insert: %w", err)
		}
		if _, err := conn.Exec(ctx, `TRUNCATE bench_scale_load`); err != nil {
			return false, err
		}
		bar.Add(to - from)
	}
	bar.Done()
	if hnsw != "" {
		for _, q := range []string{`SET maintenance_work_mem = '2GB'`, hnsw, `RESET maintenance_work_mem`} {
			if _, err := conn.Exec(ctx, q); err != nil {
				return false, fmt.Errorf("rebuild the HNSW index: %w", err)
			}
		}
	}
	steps := []string{`VACUUM ANALYZE mneme.memories`, `VACUUM ANALYZE mneme.bm25_postings`, `VACUUM ANALYZE mneme.bm25_terms`,
		`VACUUM ANALYZE mneme.bm25_docs`, `VACUUM ANALYZE mneme.bm25_stats`, `VACUUM ANALYZE mneme.messages`, `VACUUM ANALYZE mneme.message_queue`}
	for _, s := range steps {
		if _, err := conn.Exec(ctx, s); err != nil {
			return false, fmt.Errorf("%s: %w", s, err)
		}
	}
	return true, nil
}

// scaleSizes records the database's size and bytes per memory.
func scaleSizes(ctx context.Context, conn *pgx.Conn, step *ScaleStep, citus bool) error {
	step.BytesPerMemory = map[string]float64{}
	if citus {
		return scaleSizesCitus(ctx, conn, step)
	}
	if err := conn.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&step.DBBytes); err != nil {
		return err
	}
	rows, err := conn.Query(ctx, `
		SELECT CASE WHEN c.relname = 'memories' THEN 'memories heap' ELSE c.relname::text END,
		       pg_relation_size(c.oid)::float8 / greatest((SELECT count(*) FROM mneme.memories), 1)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'mneme'
		LEFT JOIN pg_index i ON i.indexrelid = c.oid
		WHERE c.relname IN ('memories', 'bm25_postings', 'bm25_terms', 'bm25_docs')
		   OR i.indrelid = 'mneme.memories'::regclass`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var name string
		var b float64
		if err := rows.Scan(&name, &b); err != nil {
			rows.Close()
			return err
		}
		step.BytesPerMemory[name] = math.Round(b*10) / 10
	}
	return rows.Err()
}

// scaleSizesCitus: on Citus the coordinator's tables are empty shells, so
// the sizes are the shards' (citus_relation_size: the heap;
// citus_total_relation_size less citus_table_size: every index of
// memories together) and the database's on every node.
func scaleSizesCitus(ctx context.Context, conn *pgx.Conn, step *ScaleStep) error {
	if err := conn.QueryRow(ctx, `SELECT sum(result::bigint)::bigint
		FROM run_command_on_all_nodes('SELECT pg_database_size(current_database())')`).Scan(&step.DBBytes); err != nil {
		return err
	}
	rows, err := conn.Query(ctx, `
		WITH n AS (SELECT greatest(count(*), 1)::float8 AS n FROM mneme.memories)
		SELECT x.name, x.bytes::float8 / n.n FROM n, (VALUES
			('memories heap', citus_relation_size('mneme.memories')),
			('memories indexes', citus_total_relation_size('mneme.memories') - citus_table_size('mneme.memories')),
			('bm25_postings', citus_relation_size('mneme.bm25_postings')),
			('bm25_terms', citus_relation_size('mneme.bm25_terms')),
			('bm25_docs', citus_relation_size('mneme.bm25_docs'))) AS x(name, bytes)`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var name string
		var b float64
		if err := rows.Scan(&name, &b); err != nil {
			rows.Close()
			return err
		}
		step.BytesPerMemory[name] = math.Round(b*10) / 10
	}
	return rows.Err()
}
