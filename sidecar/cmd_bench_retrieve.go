package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/migrate"
)

func init() {
	benchCommands["retrieve"] = command{
		"latency of mneme.retrieve (k=10) beside bare vector and BM25 top-10: --memories N [--conversations C] [--json]",
		cmdBenchRetrieve,
	}
}

// retrieveBench is the result of one run; --json prints it.
type retrieveBench struct {
	Variant       string    `json:"variant"`
	Memories      int       `json:"memories"`
	Conversations int       `json:"conversations"`
	PerConv       int       `json:"memories_per_conversation"`
	Dim           int       `json:"dim"`
	Queries       int       `json:"queries"`
	K             int       `json:"k"`
	Candidates    int       `json:"candidates"` // setting retrieve_candidates: each leg's top n
	LoadSeconds   float64   `json:"load_seconds"`
	Retrieve      latencies `json:"retrieve"`           // mneme.retrieve with the query embedding passed in
	RetrieveSQL   latencies `json:"retrieve_sql_embed"` // mneme.retrieve embedding the query in SQL
	Search        latencies `json:"search"`             // mneme.search: the same ranking, no pending review written
	Vector        latencies `json:"vector"`             // bare ORDER BY embedding <=> q LIMIT 10
	BM25          latencies `json:"bm25"`               // bare mneme.bm25_search top 10
	BM25Leg       latencies `json:"bm25_leg"`           // mneme.bm25_search top retrieve_candidates (the BM25 leg)
	VectorLeg     latencies `json:"vector_leg"`         // mneme.vector_search top retrieve_candidates (the vector leg)
}

type latencies struct {
	P50 float64 `json:"p50_ms"`
	P95 float64 `json:"p95_ms"`
	P99 float64 `json:"p99_ms"`
}

func cmdBenchRetrieve(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flag.NewFlagSet("bench retrieve", flag.ContinueOnError)
	n := fs.Int("memories", 10000, "number of memories")
	convs := fs.Int("conversations", 1, "spread the memories over this many conversations")
	queries := fs.Int("queries", 200, "timed queries per measurement")
	vector := fs.String("vector", "auto", "embedding variant: auto, pgvector or array")
	asJSON := fs.Bool("json", false, "print one JSON object")
	keep := fs.Bool("keep", false, "keep the benchmark database")
	reuse := fs.String("reuse", "", "re-measure a database kept by an earlier run with the same --memories and --conversations (migrates it, does not reload)")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if *n < 10 || *convs < 1 || *convs > *n || *queries < 1 {
		return fmt.Errorf("%w: need --memories >= 10, 1 <= --conversations <= memories, --queries >= 1", errUsage)
	}
	cfg, err := config.FromEnv()
	if err != nil {
		return err
	}
	if cfg.DatabaseURL == "" {
		return fmt.Errorf("DATABASE_URL is not set: run ./scripts/with-test-db.sh bin/mneme bench retrieve ...")
	}
	var dbURL string
	if *reuse != "" {
		if dbURL, err = databaseURL(ctx, cfg.DatabaseURL, *reuse); err != nil {
			return err
		}
	} else {
		var drop func()
		if dbURL, drop, err = benchDatabase(ctx, cfg.DatabaseURL, *keep); err != nil {
			return err
		}
		defer drop()
	}
	res, err := migrate.Run(ctx, dbURL, migrate.Options{Vector: *vector, Logger: log})
	if err != nil {
		return fmt.Errorf("migrate benchmark database: %w", err)
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())

	out := retrieveBench{Variant: res.Variant, Memories: *n, Conversations: *convs, PerConv: *n / *convs,
		Dim: res.Dim, Queries: *queries, K: 10}
	corpus, err := benchMemories(res.Dim, *n, *convs)
	if err != nil {
		return err
	}
	if *reuse != "" {
		var have int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM mneme.memories`).Scan(&have); err != nil {
			return err
		}
		if have != *n {
			return fmt.Errorf("%w: database %s has %d memories, --memories is %d", errUsage, *reuse, have, *n)
		}
	} else {
		log.Info("building memories", "memories", *n, "conversations", *convs, "variant", res.Variant)
		start := time.Now()
		if err := loadBenchMemories(ctx, conn, res.Variant, corpus); err != nil {
			return err
		}
		out.LoadSeconds = time.Since(start).Seconds()
		log.Info("built", "seconds", out.LoadSeconds)
	}

	if err := conn.QueryRow(ctx, `SELECT mneme.setting('retrieve_candidates')::int`).Scan(&out.Candidates); err != nil {
		return fmt.Errorf("read setting retrieve_candidates: %w", err)
	}
	if err := runRetrieveBench(ctx, conn, corpus, &out); err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		return enc.Encode(out)
	}
	fmt.Printf("mneme bench retrieve: %d memories in %d conversation(s), variant %s (dim %d), %d queries, k=10, load %.1fs\n",
		out.Memories, out.Conversations, out.Variant, out.Dim, out.Queries, out.LoadSeconds)
	fmt.Printf("  %-44s %9s %9s %9s\n", "query", "p50 ms", "p95 ms", "p99 ms")
	for _, r := range []struct {
		name string
		l    latencies
	}{
		{"mneme.retrieve (embedding passed)", out.Retrieve},
		{"mneme.retrieve (SQL embeds the query)", out.RetrieveSQL},
		{"mneme.search (embedding passed)", out.Search},
		{"bare ORDER BY embedding <=> q LIMIT 10", out.Vector},
		{"bare BM25 top 10 (mneme.bm25_search)", out.BM25},
		{fmt.Sprintf("its BM25 leg (bm25_search top %d)", out.Candidates), out.BM25Leg},
		{fmt.Sprintf("its vector leg (vector_search top %d)", out.Candidates), out.VectorLeg},
	} {
		fmt.Printf("  %-44s %9.2f %9.2f %9.2f\n", r.name, r.l.P50, r.l.P95, r.l.P99)
	}
	return nil
}

// databaseURL is url pointed at the existing database name (withDatabase),
// checked by connecting to it.
func databaseURL(ctx context.Context, url, name string) (string, error) {
	dsn, err := withDatabase(url, name)
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

// benchDatabase creates a scratch database next to the one in url.
func benchDatabase(ctx context.Context, url string, keep bool) (string, func(), error) {
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", nil, fmt.Errorf("connect: %w", err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "mneme_bench_" + hex.EncodeToString(b)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close(ctx)
		return "", nil, fmt.Errorf("create benchmark database: %w", err)
	}
	dbURL, err := withDatabase(url, name)
	if err != nil {
		_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name)
		admin.Close(ctx)
		return "", nil, err
	}
	return dbURL, func() {
		defer admin.Close(context.Background())
		if keep {
			fmt.Fprintf(os.Stderr, "kept benchmark database %s\n", name)
			return
		}
		_, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	}, nil
}

// benchCorpus is the generated data: each memory's conversation and words.
type benchCorpus struct {
	convs []uuid.UUID
	words [][]string // per memory
	conv  []int      // per memory: index into convs
	hash  embed.Hash
	texts []string    // per memory
	embs  [][]float32 // per memory
}

// Deterministic synthetic text: 20,000 pseudo-words from syllables, drawn
// with a Zipf distribution shaped like English content words after stop-word
// removal (the most frequent word is about 0.5% of tokens), 12 to 40 words
// per memory.
func benchVocabulary(r *mrand.Rand) []string {
	syll := strings.Fields("ka lo mi ne ru ta shi po ve da gu fe zo ri an el or us ik em bar tor lin mas pel")
	seen := map[string]bool{}
	var vocab []string
	for len(vocab) < 20000 {
		var b strings.Builder
		for j := 0; j < 2+r.IntN(4); j++ {
			b.WriteString(syll[r.IntN(len(syll))])
		}
		if w := b.String(); !seen[w] {
			seen[w] = true
			vocab = append(vocab, w)
		}
	}
	return vocab
}

// benchMemories generates the corpus (the same for the same arguments).
func benchMemories(dim, n, nconv int) (*benchCorpus, error) {
	r := mrand.New(mrand.NewPCG(42, 1))
	vocab := benchVocabulary(r)
	zipf := mrand.NewZipf(r, 1.1, 50, uint64(len(vocab)-1))
	c := &benchCorpus{hash: embed.NewHash(dim)}
	for i := 0; i < nconv; i++ {
		c.convs = append(c.convs, uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprintf("mneme-bench-%d", i))))
	}
	texts := make([]string, n)
	for i := 0; i < n; i++ {
		w := make([]string, 12+r.IntN(29))
		for j := range w {
			w[j] = vocab[zipf.Uint64()]
		}
		c.words = append(c.words, w)
		c.conv = append(c.conv, i%nconv)
		texts[i] = strings.Join(w, " ")
	}
	embs := make([][]float32, n)
	var wg sync.WaitGroup
	var embErr error
	var mu sync.Mutex
	for part := 0; part < 2; part++ {
		wg.Add(1)
		go func(part int) {
			defer wg.Done()
			for i := part; i < n; i += 2 {
				v, err := c.hash.EmbedOne(texts[i])
				if err != nil {
					mu.Lock()
					embErr = err
					mu.Unlock()
					return
				}
				embs[i] = v
			}
		}(part)
	}
	wg.Wait()
	if embErr != nil {
		return nil, fmt.Errorf("embed: %w", embErr)
	}
	c.texts, c.embs = texts, embs
	return c, nil
}

// loadBenchMemories inserts the corpus as memories and indexes them.
func loadBenchMemories(ctx context.Context, conn *pgx.Conn, variant string, c *benchCorpus) error {
	n, texts, embs := len(c.texts), c.texts, c.embs

	steps := []string{
		`CREATE UNLOGGED TABLE bench_load (conversation_id uuid, content text, embedding real[], created_at timestamptz)`,
	}
	for _, s := range steps {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("prepare load: %w", err)
		}
	}
	base := time.Now().Add(-time.Duration(n) * time.Second)
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"bench_load"}, []string{"conversation_id", "content", "embedding", "created_at"},
		pgx.CopyFromSlice(n, func(i int) ([]any, error) {
			return []any{c.convs[c.conv[i]], texts[i], embs[i], base.Add(time.Duration(i) * time.Second)}, nil
		})); err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	load := []string{
		// One statement: the BM25 trigger indexes all rows in one pass. The
		// HNSW index is built after the load, which is much faster than
		// inserting into it row by row.
		`DROP INDEX IF EXISTS mneme.memories_embedding_hnsw`,
		`INSERT INTO mneme.memories (conversation_id, content, embedding, created_at, last_reviewed_at)
		 SELECT conversation_id, content, embedding::mneme.embedding, created_at, created_at FROM bench_load`,
		`DROP TABLE bench_load`,
	}
	if variant == "pgvector" {
		load = append(load, `SET maintenance_work_mem = '1GB'`,
			`CREATE INDEX memories_embedding_hnsw ON mneme.memories USING hnsw (embedding vector_cosine_ops)`,
			`RESET maintenance_work_mem`)
	}
	load = append(load, `VACUUM ANALYZE mneme.memories`, `VACUUM ANALYZE mneme.bm25_postings`,
		`VACUUM ANALYZE mneme.bm25_terms`, `VACUUM ANALYZE mneme.bm25_stats`, `VACUUM ANALYZE mneme.bm25_docs`)
	for _, s := range load {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("load: %s: %w", strings.Fields(s)[0], err)
		}
	}
	// Index-only scans of the postings need the visibility map set; a
	// VACUUM that overlaps an older snapshot (an autovacuum worker started
	// during the load) leaves it unset, so repeat until it is.
	for try := 0; ; try++ {
		var visible float64
		if err := conn.QueryRow(ctx, `SELECT coalesce(relallvisible::float8 / nullif(relpages, 0), 1)
			FROM pg_class WHERE oid = 'mneme.bm25_postings'::regclass`).Scan(&visible); err != nil {
			return err
		}
		if visible >= 0.99 || try == 10 {
			break
		}
		time.Sleep(time.Second)
		for _, t := range []string{"bm25_postings", "bm25_docs", "bm25_terms", "memories"} {
			if _, err := conn.Exec(ctx, "VACUUM mneme."+t); err != nil {
				return fmt.Errorf("vacuum: %w", err)
			}
		}
	}
	return nil
}

func runRetrieveBench(ctx context.Context, conn *pgx.Conn, c *benchCorpus, out *retrieveBench) error {
	// The bare vector query sees mneme's and pgvector's <=> through the path.
	if _, err := conn.Exec(ctx, `SET search_path = mneme, public`); err != nil {
		return err
	}
	r := mrand.New(mrand.NewPCG(7, 7))
	type query struct {
		conv uuid.UUID
		text string
		emb  []float32
	}
	warmup := min(10, 1+out.Queries/5) // plans cached, buffers warm
	qs := make([]query, out.Queries+warmup)
	for i := range qs {
		m := r.IntN(len(c.words))
		w := c.words[m]
		// Three words of a memory and one more from anywhere.
		parts := []string{w[r.IntN(len(w))], w[r.IntN(len(w))], w[r.IntN(len(w))],
			c.words[r.IntN(len(c.words))][0]}
		text := strings.Join(parts, " ")
		emb, err := c.hash.EmbedOne(text)
		if err != nil {
			return err
		}
		qs[i] = query{conv: c.convs[c.conv[m]], text: text, emb: emb}
	}
	ops := []struct {
		sql  string
		args func(q query) []any
		dst  *latencies
	}{
		{`SELECT count(*) FROM mneme.retrieve($1, $2, 10, $3)`, func(q query) []any { return []any{q.conv, q.text, q.emb} }, &out.Retrieve},
		{`SELECT count(*) FROM mneme.retrieve($1, $2, 10)`, func(q query) []any { return []any{q.conv, q.text} }, &out.RetrieveSQL},
		{`SELECT count(*) FROM mneme.search($1, $2, 10, $3)`, func(q query) []any { return []any{q.conv, q.text, q.emb} }, &out.Search},
		{`SELECT count(*) FROM (SELECT id FROM mneme.memories ORDER BY embedding <=> $1::real[]::mneme.embedding LIMIT 10) x`,
			func(q query) []any { return []any{q.emb} }, &out.Vector},
		{`SELECT count(*) FROM mneme.bm25_search($1, $2, 10)`, func(q query) []any { return []any{q.conv, q.text} }, &out.BM25},
		{`SELECT count(*) FROM mneme.bm25_search($1, $2, $3)`,
			func(q query) []any { return []any{q.conv, q.text, out.Candidates} }, &out.BM25Leg},
		{`SELECT count(*) FROM mneme.vector_search($1, $2, $3)`,
			func(q query) []any { return []any{q.conv, q.emb, out.Candidates} }, &out.VectorLeg},
	}
	samples := make([][]float64, len(ops))
	for i := range qs {
		if i%10 == 0 {
			// A running system takes pending reviews regularly; an ever
			// longer jsonb array would slow the append down.
			if _, err := conn.Exec(ctx, `UPDATE mneme.message_queue SET pending_reviews = NULL WHERE pending_reviews IS NOT NULL`); err != nil {
				return err
			}
		}
		// Interleaved, so load from other processes hits all of them alike;
		// each statement of a round gets a different query (every statement
		// sees every measured query once), so none runs on the index pages
		// and postings another statement of the round has just brought into
		// the CPU caches.
		for j, op := range ops {
			q := qs[i]
			if i >= warmup {
				q = qs[warmup+(i-warmup+j*7)%(len(qs)-warmup)]
			}
			t0 := time.Now()
			var cnt int
			if err := conn.QueryRow(ctx, op.sql, op.args(q)...).Scan(&cnt); err != nil {
				return fmt.Errorf("query %q: %w", op.sql, err)
			}
			if i >= warmup {
				samples[j] = append(samples[j], float64(time.Since(t0).Microseconds())/1000)
			}
		}
	}
	for j, op := range ops {
		*op.dst = percentiles(samples[j])
	}
	return nil
}

func percentiles(ms []float64) latencies {
	sort.Float64s(ms)
	at := func(p float64) float64 {
		i := int(p*float64(len(ms))+0.5) - 1
		if i < 0 {
			i = 0
		}
		if i >= len(ms) {
			i = len(ms) - 1
		}
		return ms[i]
	}
	return latencies{P50: at(0.50), P95: at(0.95), P99: at(0.99)}
}
