package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/sidecar/embed"
)

// scaleVectors is a bench scale run's vectors (--vectors): hash, the hash
// embedder's (a query's computed in SQL by mneme.hash_embed, the
// statements as they were before --vectors), or clustered (clusteredEmbedder:
// every vector made in Go, a query's passed as $3 to every statement that
// needs one, so the bare lookups and the API calls pay alike and nothing
// is computed in SQL on either side).
type scaleVectors struct {
	hash      embed.Hash
	clustered *clusteredEmbedder // nil: hash
	embedder  string             // the run's embedder: hash or external
}

func newScaleVectors(o ScaleOptions, dim int) scaleVectors {
	v := scaleVectors{hash: embed.NewHash(dim), embedder: o.Embedder}
	if o.Vectors == "clustered" {
		v.clustered = newClusteredEmbedder(dim)
	}
	return v
}

func (v scaleVectors) name() string {
	if v.clustered != nil {
		return "clustered"
	}
	return "hash"
}

// EmbedOne is a stored memory's vector.
func (v scaleVectors) EmbedOne(text string) ([]float32, error) {
	if v.clustered != nil {
		return v.clustered.EmbedOne(text)
	}
	return v.hash.EmbedOne(text)
}

// sql fills a statement's placeholders for the query's vector ($2 the
// query's text): @qv@ as a mneme.embedding made once (a subquery: the
// bare lookups), @qa@ as a real[] (the vector leg), @qe@ the API calls'
// query_embedding argument (none with the hash embedder, which embeds the
// query itself).
func (v scaleVectors) sql(s string) string {
	qv, qa, qe := `(SELECT mneme.hash_embed($2)::mneme.embedding)`, `mneme.hash_embed($2)`, ""
	if v.embedder == "external" {
		qe = ", query_embedding => mneme.hash_embed($2)"
	}
	if v.clustered != nil {
		qv, qa, qe = `(SELECT $3::real[]::mneme.embedding)`, `$3::real[]`, ", query_embedding => $3::real[]"
	}
	return strings.NewReplacer("@qv@", qv, "@qa@", qa, "@qe@", qe).Replace(s)
}

// statement is a call's statement (filled by sql) and its arguments: the
// scope and the query's text, and the query's vector where the statement
// takes it as $3. A statement that reads the vector but not the text (the
// bare lookups, the vector leg) takes the vector as $2: PostgreSQL cannot
// type a parameter the statement does not read.
func (v scaleVectors) statement(call string, scope any, q string) (string, []any, error) {
	sql := v.sql(call)
	if !strings.Contains(sql, "$3") {
		return sql, []any{scope, q}, nil
	}
	if v.clustered == nil {
		return "", nil, errors.New("a statement takes the query's vector, but the run's vectors are the hash embedder's")
	}
	emb, err := v.clustered.EmbedOne(q)
	if err != nil {
		return "", nil, err
	}
	if !strings.Contains(sql, "$2") {
		return strings.ReplaceAll(sql, "$3", "$2"), []any{scope, emb}, nil
	}
	return sql, []any{scope, q, emb}, nil
}

// queryVector is a query's vector as the run's calls get it (recall:
// mneme.hash_embed in SQL for hash vectors, as before).
func (v scaleVectors) queryVector(ctx context.Context, conn *pgx.Conn, q string) ([]float32, error) {
	if v.clustered != nil {
		return v.clustered.EmbedOne(q)
	}
	var emb []float32
	err := conn.QueryRow(ctx, `SELECT mneme.hash_embed($1)`, q).Scan(&emb)
	return emb, err
}

// scaleVectorsKept records a new benchmark database's vectors and refuses
// a kept one that holds the other kind (one built before --vectors holds
// the hash embedder's): a run's vectors and queries must be alike.
func scaleVectorsKept(ctx context.Context, conn *pgx.Conn, db string, vectors string) error {
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS public.bench_scale_vectors (vectors text NOT NULL)`); err != nil {
		return err
	}
	var kept string
	err := conn.QueryRow(ctx, `SELECT coalesce((SELECT vectors FROM public.bench_scale_vectors LIMIT 1),
		CASE WHEN EXISTS (SELECT 1 FROM mneme.memories) THEN 'hash' END, '')`).Scan(&kept)
	if err != nil {
		return err
	}
	switch kept {
	case vectors:
		return nil
	case "":
		_, err := conn.Exec(ctx, `INSERT INTO public.bench_scale_vectors VALUES ($1)`, vectors)
		return err
	}
	return fmt.Errorf("the benchmark database %s holds %s vectors, asked for %s: add --fresh to build it again, or name another --db", db, kept, vectors)
}
