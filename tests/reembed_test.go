package tests

import (
	"context"
	"math"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/llm/llmtest"
	"github.com/mneme-memory/mneme/sidecar/migrate"
)

func seedReembed(t *testing.T, db *dbtest.DB) uuid.UUID {
	cid := uuid.New()
	for _, c := range []string{"Alice drinks green tea every morning", "Bob repairs old bicycles", "the weather was rainy in Oslo"} {
		_, err := db.Pool.Exec(context.Background(), `SELECT mneme.remember($1, $2)`, cid, c)
		require.NoError(t, err)
	}
	return cid
}

func TestReembedHashChangesDimension(t *testing.T) {
	skipOnCitusReembed(t)
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			db := dbtest.New(t, dbtest.WithVector(variant))
			ctx := context.Background()
			cid := seedReembed(t, db)
			conn, err := pgx.Connect(ctx, db.URL)
			require.NoError(t, err)
			defer conn.Close(ctx)
			// A session that searched before the change (an application's
			// pooled connection) goes on after it: its compiled PL/pgSQL
			// held the dropped domain ("cache lookup failed for type").
			warm, err := pgx.Connect(ctx, db.URL)
			require.NoError(t, err)
			defer warm.Close(ctx)
			calls := []string{
				`SELECT count(*) FROM mneme.search($1, 'green tea', 3)`,
				`SELECT count(*) FROM mneme.retrieve($1, 'green tea', 3)`,
				`SELECT count(*) FROM mneme.context_items($1, 'green tea')`,
			}
			for _, q := range calls {
				var c int
				require.NoError(t, warm.QueryRow(ctx, q, cid).Scan(&c), q)
			}
			n, err := migrate.Reembed(ctx, conn, 64, nil)
			require.NoError(t, err)
			require.EqualValues(t, 3, n)
			for _, q := range calls {
				var c int
				require.NoError(t, warm.QueryRow(ctx, q, cid).Scan(&c), "the same session after the change: %s", q)
				require.Positive(t, c, q)
			}
			_, err = warm.Exec(ctx, `SELECT mneme.remember($1, 'Dave sails on Sundays')`, cid)
			require.NoError(t, err, "the same session remembers after the change")

			var dim int
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT (mneme.setting('embedding_dim') #>> '{}')::int`).Scan(&dim))
			require.Equal(t, 64, dim)
			// Every embedding is the hash embedding at the new dimension.
			var bad int
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.memories
				WHERE embedding IS NULL OR mneme.cosine_distance(embedding::real[],
				      mneme.hash_embed(mneme.memory_text(title, summary, content), 64)) > 1e-6`).Scan(&bad))
			require.Zero(t, bad)
			// Retrieval works at the new dimension, both legs.
			var first string
			var vrank *int
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT content, vector_rank FROM mneme.search($1, 'green tea', 3)`, cid).Scan(&first, &vrank))
			require.Contains(t, first, "green tea")
			require.NotNil(t, vrank)
			// A new memory gets the new dimension too; the old one is rejected.
			_, err = db.Pool.Exec(ctx, `SELECT mneme.remember($1, 'Carol plays the cello')`, cid)
			require.NoError(t, err)
			_, err = db.Pool.Exec(ctx, `SELECT * FROM mneme.search($1, 'tea', 3, mneme.hash_embed('tea', 256))`, cid)
			require.Equal(t, "22023", sqlState(t, err))
			if variant == "pgvector" {
				var idx int
				require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE indexname = 'memories_embedding_hnsw'`).Scan(&idx))
				require.Equal(t, 1, idx, "the HNSW index is rebuilt")
			}
		})
	}
}

func TestReembedExternalEmbedder(t *testing.T) {
	skipOnCitusReembed(t)
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	cid := seedReembed(t, db)
	srv := llmtest.New(t)
	srv.SetEmbedDim(32)
	e := embed.New(config.Endpoint{BaseURL: srv.URL(), Model: "fake-embed"}, 32)
	conn, err := pgx.Connect(ctx, db.URL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = migrate.Reembed(ctx, conn, 32, e.Embed)
	require.NoError(t, err)
	var mode string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.setting('embedder') #>> '{}'`).Scan(&mode))
	require.Equal(t, "external", mode)
	// The stored embedding is the external model's vector (up to scale).
	rows, err := db.Pool.Query(ctx, `SELECT mneme.memory_text(title, summary, content), embedding::real[] FROM mneme.memories WHERE conversation_id = $1`, cid)
	require.NoError(t, err)
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var text string
		var got []float32
		require.NoError(t, rows.Scan(&text, &got))
		want := llmtest.Vector(text, 32)
		require.Len(t, got, 32)
		require.InDelta(t, 1.0, cosine(got, want), 1e-5, text)
		seen++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, 3, seen)
}

func TestReembedFailureChangesNothing(t *testing.T) {
	skipOnCitusReembed(t)
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	seedReembed(t, db)
	conn, err := pgx.Connect(ctx, db.URL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = migrate.Reembed(ctx, conn, 1, nil)
	require.Equal(t, "22023", sqlState(t, err))
	// An embedder that fails midway leaves the old embeddings in place.
	_, err = migrate.Reembed(ctx, conn, 32, func(context.Context, []string) ([][]float32, error) {
		return nil, context.DeadlineExceeded
	})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var dim, missing int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT (mneme.setting('embedding_dim') #>> '{}')::int,
		(SELECT count(*) FROM mneme.memories WHERE embedding IS NULL)`).Scan(&dim, &missing))
	require.Equal(t, 256, dim)
	require.Zero(t, missing)
}

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}

// skipOnCitusReembed: mneme reembed refuses a distributed mneme
// (TestCitusReembedRefused checks the refusal).
func skipOnCitusReembed(t *testing.T) {
	if dbtest.OnCitus() {
		t.Skip("mneme reembed does not run on Citus (TestCitusReembedRefused; docs/scale.md)")
	}
}
