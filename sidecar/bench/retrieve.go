// Package bench holds mneme's benchmarks (mneme bench ...): retrieval
// latency and event-transport latency and throughput, each on a scratch
// database of its own. Speed targets live here, not in timed tests.
package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/migrate"
	"github.com/mneme-memory/mneme/sidecar/scratch"
)

// RetrieveResult is the result of one run; --json prints it.
type RetrieveResult struct {
	Variant       string          `json:"variant"`
	Memories      int             `json:"memories"`
	Conversations int             `json:"conversations"`
	PerConv       int             `json:"memories_per_conversation"`
	Dim           int             `json:"dim"`
	Queries       int             `json:"queries"`
	K             int             `json:"k"`
	Candidates    int             `json:"candidates"`        // setting retrieve_candidates: the BM25 leg's top n
	VectorCands   int             `json:"vector_candidates"` // the vector leg's top n as search runs it for k 10: 10 * vector_candidates_per_k, at most Candidates
	LoadSeconds   float64         `json:"load_seconds"`
	Retrieve      Latencies       `json:"retrieve"`           // mneme.retrieve with the query embedding passed in
	RetrieveSQL   Latencies       `json:"retrieve_sql_embed"` // mneme.retrieve embedding the query in SQL
	Search        Latencies       `json:"search"`             // mneme.search: the same ranking, no pending review written
	Vector        Latencies       `json:"vector"`             // bare ORDER BY embedding <=> q LIMIT 10
	BM25          Latencies       `json:"bm25"`               // bare mneme.bm25_search top 10
	BM25Leg       Latencies       `json:"bm25_leg"`           // mneme.bm25_search top retrieve_candidates (the BM25 leg)
	VectorLeg     Latencies       `json:"vector_leg"`         // mneme.vector_search top VectorCands (the vector leg)
	Recall        *RetrieveRecall `json:"recall,omitempty"`   // each leg's top 10 against exact
	RLS           *RLSResult      `json:"rls,omitempty"`      // with --tenants
	Context       *ContextResult  `json:"context,omitempty"`  // with --context-episodes
}

type Latencies struct {
	P50 float64 `json:"p50_ms"`
	P95 float64 `json:"p95_ms"`
	P99 float64 `json:"p99_ms"`
}

// RetrieveOptions are the benchmark's knobs (mneme bench retrieve --help).
type RetrieveOptions struct {
	Server          string // DATABASE_URL: the scratch database is created on its server
	Memories        int
	Conversations   int
	Queries         int
	Vector          string // auto | pgvector | array
	Keep            bool   // keep the benchmark database
	Citus           bool   // Server is a Citus coordinator: distribute the benchmark database
	Reuse           string // re-measure this kept database instead of loading a new one
	Tenants         int    // > 0: spread the conversations over this many tenants and time retrieve under RLS
	ContextEpisodes int    // > 0: also time a 1,000-word mneme.context over a conversation of this many episodes
	Log             *slog.Logger
}

// ErrReuseMismatch means --reuse names a database of another size.
var ErrReuseMismatch = errors.New("the reused database does not match")

// Retrieve builds (or reuses) a database of synthetic memories and times
// mneme.retrieve, mneme.search, their legs and the bare queries.
func Retrieve(ctx context.Context, o RetrieveOptions) (RetrieveResult, error) {
	var out RetrieveResult
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.Memories < 10 || o.Conversations < 1 || o.Conversations > o.Memories || o.Queries < 1 {
		return out, fmt.Errorf("need memories >= 10, 1 <= conversations <= memories, queries >= 1")
	}
	var dbURL string
	var err error
	if o.Reuse != "" {
		if dbURL, err = scratch.Existing(ctx, o.Server, o.Reuse); err != nil {
			return out, err
		}
	} else {
		db, err := scratch.Create(ctx, scratch.Options{Server: o.Server, Prefix: "mneme_bench_", Keep: o.Keep, Log: log, Citus: o.Citus})
		if err != nil {
			return out, err
		}
		defer db.Close()
		dbURL = db.URL
	}
	res, err := migrate.Run(ctx, dbURL, migrate.Options{Vector: o.Vector, Logger: log, Citus: o.Citus})
	if err != nil {
		return out, fmt.Errorf("migrate benchmark database: %w", err)
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return out, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())

	out = RetrieveResult{Variant: res.Variant, Memories: o.Memories, Conversations: o.Conversations,
		PerConv: o.Memories / o.Conversations, Dim: res.Dim, Queries: o.Queries, K: 10}
	corpus, err := benchMemories(res.Dim, o.Memories, o.Conversations)
	if err != nil {
		return out, err
	}
	if o.Reuse != "" {
		var have int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM mneme.memories`).Scan(&have); err != nil {
			return out, err
		}
		if have != o.Memories {
			return out, fmt.Errorf("%w: database %s has %d memories, --memories is %d", ErrReuseMismatch, o.Reuse, have, o.Memories)
		}
	} else {
		log.Info("building memories", "memories", o.Memories, "conversations", o.Conversations, "variant", res.Variant)
		start := time.Now()
		if o.Tenants > 0 {
			if err := loadTenants(ctx, conn, corpus, o.Tenants); err != nil {
				return out, err
			}
		}
		if err := loadBenchMemories(ctx, conn, res.Variant, corpus); err != nil {
			return out, err
		}
		out.LoadSeconds = time.Since(start).Seconds()
		log.Info("built", "seconds", out.LoadSeconds)
	}

	if err := conn.QueryRow(ctx, `SELECT mneme.setting('retrieve_candidates')::int,
		least(mneme.setting('retrieve_candidates')::int, 10 * mneme.setting('vector_candidates_per_k')::int)`).Scan(&out.Candidates, &out.VectorCands); err != nil {
		return out, fmt.Errorf("read settings retrieve_candidates and vector_candidates_per_k: %w", err)
	}
	if err := runRetrieveBench(ctx, conn, corpus, &out); err != nil {
		return out, err
	}
	if out.Recall, err = retrieveRecall(ctx, conn, corpus); err != nil {
		return out, fmt.Errorf("recall: %w", err)
	}
	if o.Tenants > 0 {
		if out.RLS, err = runRLSBench(ctx, conn, dbURL, corpus, o.Tenants, o.Queries); err != nil {
			return out, err
		}
	}
	if o.ContextEpisodes > 0 {
		if out.Context, err = runContextBench(ctx, conn, corpus, o.ContextEpisodes, o.Queries); err != nil {
			return out, err
		}
	}
	return out, nil
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
		// Every conversation with memories has its queue row, which holds
		// its tenant and its pending reviews (add_message and remember make
		// it): without it only a caller that sees every tenant could read
		// the conversation (measured on Citus: retrieve, checked on the
		// coordinator, returned nothing; the superuser's search, delegated,
		// did not check).
		`INSERT INTO mneme.message_queue (id) SELECT DISTINCT conversation_id FROM bench_load ON CONFLICT (id) DO NOTHING`,
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

func runRetrieveBench(ctx context.Context, conn *pgx.Conn, c *benchCorpus, out *RetrieveResult) error {
	// The bare vector query sees mneme's and pgvector's <=> through the path.
	if _, err := conn.Exec(ctx, `SET search_path = mneme, public`); err != nil {
		return err
	}
	warmup := min(10, 1+out.Queries/5) // plans cached, buffers warm
	qs, err := makeQueries(c, out.Queries+warmup)
	if err != nil {
		return err
	}
	ops := []struct {
		sql  string
		args func(q query) []any
		dst  *Latencies
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
			func(q query) []any { return []any{q.conv, q.emb, out.VectorCands} }, &out.VectorLeg},
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

// query is one timed query: a conversation (its tenant: conv index), words
// of one of its memories, their embedding.
type query struct {
	conv  uuid.UUID
	convI int
	text  string
	emb   []float32
}

// makeQueries draws n queries, the same ones every run: three words of a
// memory and one more from anywhere.
func makeQueries(c *benchCorpus, n int) ([]query, error) {
	r := mrand.New(mrand.NewPCG(7, 7))
	qs := make([]query, n)
	for i := range qs {
		m := r.IntN(len(c.words))
		w := c.words[m]
		parts := []string{w[r.IntN(len(w))], w[r.IntN(len(w))], w[r.IntN(len(w))],
			c.words[r.IntN(len(c.words))][0]}
		text := strings.Join(parts, " ")
		emb, err := c.hash.EmbedOne(text)
		if err != nil {
			return nil, err
		}
		qs[i] = query{conv: c.convs[c.conv[m]], convI: c.conv[m], text: text, emb: emb}
	}
	return qs, nil
}
