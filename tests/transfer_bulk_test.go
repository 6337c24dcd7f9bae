package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/transfer"
)

// bulkFixture is a tenant's export file whose memory embeddings are scaled
// (so the array variant must normalise every one) and the same memory lines
// as mneme.import_memories takes them.
type bulkFixture struct {
	file  []byte
	lines []map[string]any // memory lines, ids as in the file
}

// bulkSource writes memories through the API (mneme.remember: titles, long
// and unicode texts, a forgotten one), exports them with embeddings and
// scales each embedding by 2.5.
func bulkSource(t *testing.T, db *dbtest.DB) bulkFixture {
	t.Helper()
	ctx := context.Background()
	conv := uuid.New()
	texts := []string{
		"The user lives in Bergen, near the fish market.",
		"The user's dog Rufus likes the riverbank in the morning.",
		"Café Søstrene opens at nine; the user meets Åse there on Fridays.",
		"The user prefers green tea to coffee after lunch.",
		strings.Repeat("A long note about the garden and the old apple trees. ", 40),
		"Meeting with the bank about the mortgage on Tuesday at 10:30.",
		"The user is allergic to peanuts and to walnuts.",
		"The user's sister Ingrid lives in Trondheim and works at the hospital.",
		"Train to Oslo leaves from platform 4.",
		"The user's codeword is tangerine.",
	}
	t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	var forget uuid.UUID
	for i, text := range texts {
		var id uuid.UUID
		var title *string
		if i%3 == 0 {
			s := fmt.Sprintf("Note %d", i)
			title = &s
		}
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, $2, title => $3, at => $4)`,
			conv, text, title, t0.Add(time.Duration(i)*time.Minute)).Scan(&id))
		if i == 7 {
			forget = id
		}
	}
	_, err := db.Pool.Exec(ctx, `SELECT mneme.forget($1, 'moved away')`, forget)
	require.NoError(t, err)

	file := exportAll(t, db.URL, transfer.ExportOptions{Embeddings: true})
	var out bytes.Buffer
	var lines []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(file), []byte("\n")) {
		var m map[string]any
		d := json.NewDecoder(bytes.NewReader(l))
		d.UseNumber()
		require.NoError(t, d.Decode(&m))
		if m["type"] == "memory" {
			emb, ok := m["embedding"].([]any)
			require.True(t, ok, "the export has embeddings")
			for i, x := range emb {
				f, err := x.(json.Number).Float64()
				require.NoError(t, err)
				emb[i] = float32(f) * 2.5
			}
			b, err := json.Marshal(m)
			require.NoError(t, err)
			l = b
			line := map[string]any{}
			for k, v := range m {
				switch k {
				case "type", "conversation", "source_messages":
				default:
					line[k] = v
				}
			}
			lines = append(lines, line)
		}
		out.Write(l)
		out.WriteByte('\n')
	}
	require.Len(t, lines, len(texts))
	return bulkFixture{file: out.Bytes(), lines: lines}
}

// linesAs gives the lines the ids id(old); one line (the second) has no
// embedding when without is set.
func linesAs(t *testing.T, lines []map[string]any, id func(uuid.UUID) uuid.UUID, without bool) string {
	t.Helper()
	var out []map[string]any
	for i, l := range lines {
		c := map[string]any{}
		for k, v := range l {
			c[k] = v
		}
		c["id"] = id(uuid.MustParse(l["id"].(string)))
		if without && i == 1 {
			delete(c, "embedding")
		}
		out = append(out, c)
	}
	b, err := json.Marshal(out)
	require.NoError(t, err)
	return string(b)
}

// bm25Of is a conversation's BM25 rows with each memory id replaced by
// the file's (old) id: postings, documents, terms and totals, sorted.
func bm25Of(t *testing.T, pool *pgxpool.Pool, conv uuid.UUID, old map[uuid.UUID]uuid.UUID) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	rows, err := pool.Query(ctx, `SELECT memory_id, term, tf, doclen FROM mneme.bm25_postings WHERE conversation_id = $1`, conv)
	require.NoError(t, err)
	for rows.Next() {
		var id uuid.UUID
		var term string
		var tf, dl int
		require.NoError(t, rows.Scan(&id, &term, &tf, &dl))
		out = append(out, fmt.Sprintf("posting %s %q %d %d", old[id], term, tf, dl))
	}
	require.NoError(t, rows.Err())
	rows, err = pool.Query(ctx, `SELECT memory_id, doclen FROM mneme.bm25_docs WHERE conversation_id = $1`, conv)
	require.NoError(t, err)
	for rows.Next() {
		var id uuid.UUID
		var dl int
		require.NoError(t, rows.Scan(&id, &dl))
		out = append(out, fmt.Sprintf("doc %s %d", old[id], dl))
	}
	require.NoError(t, rows.Err())
	rows, err = pool.Query(ctx, `SELECT format('term %s %s %s %s', term, df, max_tf, min_len_per_tf) FROM mneme.bm25_terms WHERE conversation_id = $1
		UNION ALL SELECT format('stats %s %s', n, total_len) FROM mneme.bm25_stats WHERE conversation_id = $1`, conv)
	require.NoError(t, err)
	more, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	out = append(out, more...)
	sortStrings(out)
	require.NotEmpty(t, out)
	return out
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// embeddingsOf is each memory's stored embedding by its old id.
func embeddingsOf(t *testing.T, pool *pgxpool.Pool, conv uuid.UUID, old map[uuid.UUID]uuid.UUID) map[uuid.UUID][]float32 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT id, embedding::real[] FROM mneme.memories WHERE conversation_id = $1`, conv)
	require.NoError(t, err)
	out := map[uuid.UUID][]float32{}
	for rows.Next() {
		var id uuid.UUID
		var v []float32
		require.NoError(t, rows.Scan(&id, &v))
		out[old[id]] = v
	}
	require.NoError(t, rows.Err())
	return out
}

// searchOf is what bm25_search and search answer on a conversation, ids
// replaced by the old ones: bm25_search's ranks and scores (to 1e-9; equal
// scores share a rank and are listed by id, which differs between the
// conversations, so the lines are sorted), and search's scores by query
// and memory (search's retrievability moves with the clock between calls:
// compared to 1e-9 by sameSearch).
func searchOf(t *testing.T, pool *pgxpool.Pool, conv uuid.UUID, old map[uuid.UUID]uuid.UUID) ([]string, map[string]float64) {
	t.Helper()
	ctx := context.Background()
	var out []string
	scores := map[string]float64{}
	for _, q := range []string{"where does the user live", "green tea after lunch", "the dog by the river", "apple trees"} {
		rows, err := pool.Query(ctx, `SELECT memory_id, score, rank FROM mneme.bm25_search($1, $2, 20)`, conv, q)
		require.NoError(t, err)
		for rows.Next() {
			var id uuid.UUID
			var score float64
			var rank int
			require.NoError(t, rows.Scan(&id, &score, &rank))
			out = append(out, fmt.Sprintf("bm25 %q %d %.9f %s", q, rank, score, old[id]))
		}
		require.NoError(t, rows.Err())
		rows, err = pool.Query(ctx, `SELECT memory_id, score FROM mneme.search($1, $2, 20)`, conv, q)
		require.NoError(t, err)
		for rows.Next() {
			var id uuid.UUID
			var score float64
			require.NoError(t, rows.Scan(&id, &score))
			scores[fmt.Sprintf("%q %s", q, old[id])] = score
		}
		require.NoError(t, rows.Err())
	}
	sortStrings(out)
	require.NotEmpty(t, out)
	require.NotEmpty(t, scores)
	return out, scores
}

func sameSearch(t *testing.T, want, got map[string]float64) {
	t.Helper()
	require.Len(t, got, len(want))
	for k, w := range want {
		require.Contains(t, got, k)
		require.InDelta(t, w, got[k], 1e-9, k)
	}
}

// A conversation imported through the bulk path (mneme import, which sends
// the embeddings normalised; and mneme.import_memories normalising them
// itself) holds exactly what the per-row path writes for the same lines: a
// plain INSERT through every trigger. Embeddings bit for bit, the BM25
// postings, documents, terms and totals, and the answers of bm25_search
// and search; in both vector variants.
func TestImportBulkEqualsRowPath(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			src := dbtest.New(t, dbtest.WithVector(variant))
			fx := bulkSource(t, src)

			db := dbtest.New(t, dbtest.WithVector(variant))
			admin := db.As(t, "mneme_admin")
			// The bulk path through mneme import (Go normalises).
			res, err := importFile(t, admin, fx.file, transfer.ImportOptions{NewIDs: true})
			require.NoError(t, err)
			require.True(t, res.KeptEmbedding)
			remap := func(id uuid.UUID) uuid.UUID { return uuid.NewSHA1(res.Seed, id[:]) }
			var goConv uuid.UUID
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT DISTINCT conversation_id FROM mneme.memories`).Scan(&goConv))

			// The bulk path of mneme.import_memories itself (SQL
			// normalises; a line without an embedding gets the built-in
			// one), as an admin.
			sqlConv, rowConv := uuid.New(), uuid.New()
			sqlNS, rowNS := uuid.New(), uuid.New()
			sqlID := func(id uuid.UUID) uuid.UUID { return uuid.NewSHA1(sqlNS, id[:]) }
			rowID := func(id uuid.UUID) uuid.UUID { return uuid.NewSHA1(rowNS, id[:]) }
			_, err = db.Pool.Exec(ctx, `INSERT INTO mneme.message_queue (id, tenant_id) VALUES ($1, 'default'), ($2, 'default')`, sqlConv, rowConv)
			require.NoError(t, err)
			adminConn, err := pgx.Connect(ctx, admin)
			require.NoError(t, err)
			defer adminConn.Close(ctx)
			_, err = adminConn.Exec(ctx, `SELECT count(*) FROM mneme.import_memories($1, $2::jsonb, false)`, sqlConv, linesAs(t, fx.lines, sqlID, true))
			require.NoError(t, err)

			// The per-row path: a plain INSERT of the same lines, every
			// trigger on.
			_, err = db.Pool.Exec(ctx, `INSERT INTO mneme.memories (id, conversation_id, tenant_id, kind, title, content, summary,
				surprise, stability, difficulty, fsrs_state, last_reviewed_at, review_count, label, pinned, status, status_reason,
				confidence_score, last_confirmed_at, source_type, metadata, created_at, updated_at, embedding)
				SELECT r.id, $1, 'default', r.kind, r.title, r.content, r.summary, r.surprise, r.stability, r.difficulty, r.fsrs_state,
				       r.last_reviewed_at, r.review_count, r.label, r.pinned, r.status, r.status_reason, r.confidence_score,
				       r.last_confirmed_at, r.source_type, coalesce(r.metadata, '{}'), r.created_at, r.updated_at, r.embedding
				FROM jsonb_to_recordset($2::jsonb) AS r(id uuid, kind text, title text, content text, summary text, surprise real,
				     stability float8, difficulty float8, fsrs_state text, last_reviewed_at timestamptz, review_count int, label text,
				     pinned boolean, status text, status_reason text, confidence_score real, last_confirmed_at timestamptz,
				     source_type text, metadata jsonb, created_at timestamptz, updated_at timestamptz, embedding real[])`,
				rowConv, linesAs(t, fx.lines, rowID, true))
			require.NoError(t, err)

			goOld, sqlOld, rowOld := map[uuid.UUID]uuid.UUID{}, map[uuid.UUID]uuid.UUID{}, map[uuid.UUID]uuid.UUID{}
			for _, l := range fx.lines {
				id := uuid.MustParse(l["id"].(string))
				goOld[remap(id)], sqlOld[sqlID(id)], rowOld[rowID(id)] = id, id, id
			}

			want := bm25Of(t, db.Pool, rowConv, rowOld)
			require.Equal(t, want, bm25Of(t, db.Pool, sqlConv, sqlOld), "BM25 rows: mneme.import_memories and the per-row path")
			require.Equal(t, want, bm25Of(t, db.Pool, goConv, goOld), "BM25 rows: mneme import and the per-row path")
			require.Equal(t, 9, countPrefix(want, "doc "), "the forgotten memory is not counted")

			rowEmb := embeddingsOf(t, db.Pool, rowConv, rowOld)
			require.Equal(t, rowEmb, embeddingsOf(t, db.Pool, sqlConv, sqlOld), "embeddings: mneme.import_memories and the per-row path")
			goEmb := embeddingsOf(t, db.Pool, goConv, goOld)
			second := uuid.MustParse(fx.lines[1]["id"].(string))
			require.NotNil(t, rowEmb[second], "the line without an embedding got the built-in one")
			delete(goEmb, second) // the file has it (mneme import kept the file's)
			delete(rowEmb, second)
			require.Equal(t, rowEmb, goEmb, "embeddings: mneme import and the per-row path")
			for id, v := range rowEmb {
				var sum float64
				for _, x := range v {
					sum += float64(x) * float64(x)
				}
				if variant == "array" {
					require.InDelta(t, 1, math.Sqrt(sum), 1e-6, "normalised: %s", id)
				} else {
					require.InDelta(t, 2.5, math.Sqrt(sum), 1e-4, "pgvector keeps the vector as given: %s", id)
				}
			}

			wantBM25, wantSearch := searchOf(t, db.Pool, rowConv, rowOld)
			for _, c := range []struct {
				conv uuid.UUID
				old  map[uuid.UUID]uuid.UUID
			}{{sqlConv, sqlOld}, {goConv, goOld}} {
				bm25, search := searchOf(t, db.Pool, c.conv, c.old)
				require.Equal(t, wantBM25, bm25)
				sameSearch(t, wantSearch, search)
			}
		})
	}
}

func countPrefix(s []string, p string) int {
	n := 0
	for _, x := range s {
		if strings.HasPrefix(x, p) {
			n++
		}
	}
	return n
}

// The normalisation trigger stands aside only for mneme import: the
// setting mneme.bulk_load counts in an admin's session (which is what
// mneme.import_memories runs in), not in an application's or the
// sidecar's. An application that sets it still gets its memory indexed
// for BM25 and normalised (it cannot insert rows itself at all), and the
// sidecar's set_embedding is normalised; the admin's import with
// normalized => true stores the vector as sent (so the check can fail).
func TestImportBulkLoadOnlyForImport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t, dbtest.WithVector("array"))
	conv := uuid.New()
	_, err := db.Pool.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'hello there')`, conv)
	require.NoError(t, err)
	norm := func(id uuid.UUID) float64 {
		var n float64
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT sqrt(sum(x::float8 * x)) FROM mneme.memories m, unnest(m.embedding::real[]) x
			WHERE m.id = $1`, id).Scan(&n))
		return n
	}
	scaled := make([]float32, 256)
	for i := range scaled {
		scaled[i] = float32(i%7) - 2.5
	}

	// An application login.
	app, err := pgx.Connect(ctx, db.As(t, "mneme_app"))
	require.NoError(t, err)
	defer app.Close(ctx)
	_, err = app.Exec(ctx, `SET mneme.bulk_load = 'on'`)
	require.NoError(t, err)
	var id uuid.UUID
	require.NoError(t, app.QueryRow(ctx, `SELECT mneme.remember($1, 'The user keeps bees in the garden.')`, conv).Scan(&id))
	var docs int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.bm25_docs WHERE memory_id = $1`, id).Scan(&docs))
	require.Equal(t, 1, docs, "indexed for BM25")
	require.InDelta(t, 1, norm(id), 1e-6)
	_, err = app.Exec(ctx, `INSERT INTO mneme.memories (conversation_id, content) VALUES ($1, 'sneaked in')`, conv)
	require.Equal(t, "42501", sqlState(t, err), "an application writes through the API only")

	// The sidecar's login: set_embedding with the flag set is normalised.
	worker, err := pgx.Connect(ctx, db.As(t, "mneme_worker"))
	require.NoError(t, err)
	defer worker.Close(ctx)
	_, err = worker.Exec(ctx, `SET mneme.bulk_load = 'on'`)
	require.NoError(t, err)
	_, err = worker.Exec(ctx, `SELECT mneme.set_embedding($1, $2::real[])`, id, scaled)
	require.NoError(t, err)
	require.InDelta(t, 1, norm(id), 1e-6, "normalised although the worker set mneme.bulk_load")

	// mneme import (an admin) with normalized => true: stored as sent.
	admin, err := pgx.Connect(ctx, db.As(t, "mneme_admin"))
	require.NoError(t, err)
	defer admin.Close(ctx)
	imported := uuid.New()
	line, err := json.Marshal([]map[string]any{{"id": imported, "kind": "semantic", "content": "Imported as sent.", "summary": "Imported as sent.",
		"surprise": 0, "stability": 10, "difficulty": 5, "fsrs_state": "review", "last_reviewed_at": "2026-03-01T08:00:00Z",
		"review_count": 0, "label": "general", "pinned": false, "status": "active", "confidence_score": 1, "source_type": "import",
		"created_at": "2026-03-01T08:00:00Z", "updated_at": "2026-03-01T08:00:00Z", "embedding": scaled}})
	require.NoError(t, err)
	_, err = admin.Exec(ctx, `SELECT count(*) FROM mneme.import_memories($1, $2::jsonb, true)`, conv, string(line))
	require.NoError(t, err)
	var want float64
	for _, x := range scaled {
		want += float64(x) * float64(x)
	}
	require.InDelta(t, math.Sqrt(want), norm(imported), 1e-3, "the importer vouched for it: not normalised again")
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.bm25_docs WHERE memory_id = $1`, imported).Scan(&docs))
	require.Equal(t, 1, docs, "an import is indexed for BM25")
	var flag string
	require.NoError(t, admin.QueryRow(ctx, `SELECT coalesce(current_setting('mneme.bulk_load', true), '')`).Scan(&flag))
	require.Empty(t, flag, "the flag is off again after the import function")

	// Bad binary embeddings: 22023, nothing written.
	one, err := json.Marshal([]map[string]any{{"id": uuid.New(), "kind": "semantic", "content": "Bad embedding place.",
		"surprise": 0, "stability": 10, "difficulty": 5, "fsrs_state": "review", "last_reviewed_at": "2026-03-01T08:00:00Z",
		"review_count": 0, "label": "general", "pinned": false, "status": "active", "confidence_score": 1, "source_type": "import",
		"created_at": "2026-03-01T08:00:00Z", "updated_at": "2026-03-01T08:00:00Z", "embedding_at": 2}})
	require.NoError(t, err)
	_, err = admin.Exec(ctx, `SELECT count(*) FROM mneme.import_memories($1, $2::jsonb, true, $3::real[])`, conv, string(one), scaled)
	require.Equal(t, "22023", sqlState(t, err), "embedding_at past the array")
	_, err = admin.Exec(ctx, `SELECT count(*) FROM mneme.import_memories($1, $2::jsonb, true, $3::real[])`, conv, string(one), scaled[:100])
	require.Equal(t, "22023", sqlState(t, err), "not a whole number of embeddings")
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.memories WHERE content = 'Bad embedding place.'`).Scan(&n))
	require.Zero(t, n)

	// NULL for normalized: 22004.
	_, err = admin.Exec(ctx, `SELECT count(*) FROM mneme.import_memories($1, '[]'::jsonb, NULL)`, conv)
	require.Equal(t, "22004", sqlState(t, err))
}

// The helpers BM25 maintenance and the bulk insert call per row are
// inlined by the planner (plain SQL without SET, not SECURITY DEFINER, no
// more volatile than their body): a SECURITY DEFINER call per memory cost
// as much as the tokenising. An IMMUTABLE _memory_text (concat_ws is
// STABLE) was not inlined: this fails then.
func TestImportBulkHelpersInline(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t, dbtest.WithVector("array"))
	rows, err := db.Pool.Query(context.Background(), `EXPLAIN (VERBOSE)
		SELECT mneme._bm25_tsv(mneme._memory_text(m.title, m.summary, m.content)), n.embedding
		FROM mneme.memories m, mneme._l2_normalized(m.embedding::real[]) n`)
	require.NoError(t, err)
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	text := strings.Join(plan, "\n")
	for _, f := range []string{"_bm25_tsv", "_memory_text", "_l2_normalized"} {
		require.NotContains(t, text, f, "inlined")
	}
	require.Contains(t, text, "to_tsvector")
	require.Contains(t, text, "concat_ws")
}
