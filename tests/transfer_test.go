package tests

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/llm/llmtest"
	"github.com/mneme-memory/mneme/sidecar/pipeline"
	"github.com/mneme-memory/mneme/sidecar/transfer"
)

// transferSource fills a database with what an export must carry: episodes
// and extracted facts from conversations, remembered facts (a duplicate
// that merges, a move that supersedes), reviews, a forgotten, a pinned and
// an erased memory, a conversation erased whole, pending reviews and a
// changed setting. It returns the conversations that hold memories.
func transferSource(t *testing.T, variant string) (*pipelineEnv, []uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	e := newPipelineEnv(t, false, dbtest.WithVector(variant))
	exec := execer(t, e.db.Pool)
	exec(`SELECT mneme.set_setting('segment_shift_similarity', '-1')`)
	exec(`SELECT mneme.set_setting('rrf_k', '50')`)
	e2, gone := *e, *e
	e2.conv, gone.conv = uuid.New(), uuid.New()
	t0 := time.Now().UTC().Truncate(time.Minute).Add(-10 * 24 * time.Hour)
	d1, d3 := t0, t0.Add(48*time.Hour)
	stated, later := t0.Add(-2*time.Hour), t0.Add(-time.Hour)
	e.session(d1, [][2]string{
		{"user", "I live in the town of Millbrook near the river."},
		{"assistant", "Millbrook sounds like a quiet place by the water."},
		{"user", "My dog is called Rufus and he loves the riverbank."},
		{"assistant", "Rufus is a fine name for a river dog."},
		{"user", "We walk there every morning before work."},
		{"assistant", "Morning walks by the river are a good habit."},
	})
	exec(`SELECT mneme.remember($1, 'My codeword is tangerine.', at => $2)`, e.conv, stated)
	exec(`SELECT mneme.remember($1, 'My codeword is tangerine.', at => $2)`, e.conv, stated)
	exec(`SELECT mneme.remember($1, 'I live in Oslo.', at => $2)`, e.conv, stated)
	exec(`SELECT mneme.remember($1, 'I live in Bergen.', at => $2)`, e.conv, later)
	exec(`SELECT mneme.remember($1, 'My bank opens at nine.', at => $2, label => 'important')`, e2.conv, stated)
	exec(`SELECT mneme.remember($1, 'The secret project is called Nightjar.', at => $2)`, gone.conv, stated)
	exec(`SELECT mneme.segment_now($1)`, e.conv)
	e.drain()
	e.search("where does the user live", 5)
	e.search("what is the dog called", 5)
	e.session(d3, [][2]string{
		{"user", "Back again: the weather turned cold."}, {"assistant", "Wrap up warm then."},
		{"user", "I bought a new coat yesterday for the walks with Rufus."}, {"assistant", "A good coat makes winter easier."},
		{"user", "It is a green one."},
	})
	exec(`SELECT mneme.segment_now($1)`, e.conv)
	e.drain()
	require.Positive(t, e.count(`SELECT count(*) FROM mneme.review_log`), "reviews ran")
	require.Positive(t, e.count(`SELECT count(*) FROM mneme.memories WHERE status = 'merged'`), "a duplicate merged")
	require.Positive(t, e.count(`SELECT count(*) FROM mneme.memories WHERE status = 'superseded'`), "a move superseded")
	var bank, code uuid.UUID
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT id FROM mneme.memories WHERE content LIKE 'My bank%'`).Scan(&bank))
	exec(`SELECT mneme.pin($1)`, bank)
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT id FROM mneme.memories WHERE content LIKE 'My codeword%' AND status = 'active'`).Scan(&code))
	exec(`SELECT mneme.forget($1, 'the user took it back')`, code)
	var erased uuid.UUID
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT id FROM mneme.memories WHERE conversation_id = $1 AND kind = 'semantic'
		AND source_type = 'extracted' AND status = 'active' ORDER BY id LIMIT 1`, e.conv).Scan(&erased))
	exec(`SELECT mneme.erase($1, 'user request')`, erased)
	exec(`SELECT mneme.erase_conversation($1, 'user request')`, gone.conv)
	e.search("the green coat", 5) // pending, not reviewed yet
	// A queued message (not segmented yet) is carried too.
	e.say(d3.Add(time.Hour).Format(time.RFC3339), "user", "One more thing about the coat.")
	return e, []uuid.UUID{e.conv, e2.conv}
}

func exportAll(t *testing.T, url string, o transfer.ExportOptions) []byte {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var buf bytes.Buffer
	_, err = transfer.Export(ctx, conn, &buf, o)
	require.NoError(t, err)
	return buf.Bytes()
}

func importFile(t *testing.T, url string, file []byte, o transfer.ImportOptions) (transfer.Result, error) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	return transfer.Import(ctx, conn, bytes.NewReader(file), o)
}

// withoutExportTime drops the header's time: the one field two exports of
// the same rows differ in.
func withoutExportTime(t *testing.T, file []byte) string {
	t.Helper()
	lines := strings.SplitN(string(file), "\n", 2)
	require.Len(t, lines, 2)
	i := strings.Index(lines[0], `"exported_at": "`)
	require.Positive(t, i, lines[0])
	return lines[0][:i] + lines[0][i+len(`"exported_at": "`)+27:] + "\n" + lines[1]
}

// Export, import into a fresh database, export again: the same file but
// the header's time, in both vector variants, with and without embeddings;
// search, context_items, inspect and history answer the same on both.
func TestTransferRoundTrip(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			src, convs := transferSource(t, variant)
			for _, emb := range []bool{false, true} {
				first := exportAll(t, src.db.URL, transfer.ExportOptions{Embeddings: emb, MnemeVersion: "test"})
				require.Contains(t, string(first), `"event": "erased"`, "the erased memory's tombstone is exported")
				require.Contains(t, string(first), `"erased": true`, "the conversation erased whole is exported")
				require.NotContains(t, string(first), "Nightjar", "an erased conversation's content is not exported")
				require.Contains(t, string(first), `"asked_in": "`, "a review names the conversation that asked for it")
				require.Contains(t, string(first), `"evidence": {"score": `, "a review carries the heuristic's evidence")
				require.Contains(t, string(first), `"ends_session": true`, "segment_now's session ends are carried")
				require.Equal(t, emb, strings.Contains(string(first), `"embedding": [`))

				dst := dbtest.New(t, dbtest.WithVector(variant))
				res, err := importFile(t, dst.URL, first, transfer.ImportOptions{Settings: true})
				require.NoError(t, err)
				require.Equal(t, emb, res.KeptEmbedding)
				require.EqualValues(t, 0, res.DroppedLinks)
				second := exportAll(t, dst.URL, transfer.ExportOptions{Embeddings: emb, MnemeVersion: "test"})
				require.Equal(t, withoutExportTime(t, first), withoutExportTime(t, second))
				// The reviews' evidence, as stored (the UI shows it).
				evidence := `SELECT count(*) FILTER (WHERE evidence ? 'thresholds'), string_agg(memory_id::text || ' ' || rating || ' ' ||
					coalesce(evidence::text, '-'), E'\n' ORDER BY memory_id, reviewed_at, id) FROM mneme.review_log`
				var srcN, dstN int
				var srcEv, dstEv string
				require.NoError(t, src.db.Pool.QueryRow(context.Background(), evidence).Scan(&srcN, &srcEv))
				require.NoError(t, dst.Pool.QueryRow(context.Background(), evidence).Scan(&dstN, &dstEv))
				require.Positive(t, dstN, "the imported reviews hold their evidence")
				require.Equal(t, srcEv, dstEv)

				// Embeddings too, when they were not in the file (recomputed).
				if !emb {
					withEmb := exportAll(t, src.db.URL, transfer.ExportOptions{Embeddings: true, MnemeVersion: "test"})
					again := exportAll(t, dst.URL, transfer.ExportOptions{Embeddings: true, MnemeVersion: "test"})
					require.Equal(t, withoutExportTime(t, withEmb), withoutExportTime(t, again))
				}
				sameAnswers(t, src.db.Pool, dst.Pool, convs)

				// Importing the same file again changes nothing: every
				// conversation is there already (a resumed import).
				res, err = importFile(t, dst.URL, first, transfer.ImportOptions{Settings: true})
				require.NoError(t, err)
				require.EqualValues(t, 0, res.Conversations)
				require.Positive(t, res.Skipped)
				third := exportAll(t, dst.URL, transfer.ExportOptions{Embeddings: emb, MnemeVersion: "test"})
				require.Equal(t, withoutExportTime(t, first), withoutExportTime(t, third))
			}
		})
	}
}

// sameAnswers compares the read calls on two databases holding the same
// memory: message ids differ between them, so turns are compared by text.
func sameAnswers(t *testing.T, a, b *pgxpool.Pool, convs []uuid.UUID) {
	t.Helper()
	at := time.Now().UTC().Truncate(time.Second)
	queries := []string{"where does the user live", "dog by the river", "codeword", "green coat", "bank"}
	dump := func(p *pgxpool.Pool, q string, args ...any) string {
		t.Helper()
		rows, err := p.Query(context.Background(), q, args...)
		require.NoError(t, err)
		defer rows.Close()
		var out []string
		for rows.Next() {
			v, err := rows.Values()
			require.NoError(t, err)
			for i, x := range v {
				if b, ok := x.([16]byte); ok {
					v[i] = uuid.UUID(b).String()
				}
			}
			out = append(out, fmt.Sprint(v...))
		}
		require.NoError(t, rows.Err())
		return strings.Join(out, "\n")
	}
	for _, c := range convs {
		for _, q := range queries {
			s := `SELECT memory_id, kind, summary, content, score, rrf, bm25_rank, vector_rank, retrievability, label, pinned, status
				FROM mneme.search($1, $2, 10, at => $3)`
			require.Equal(t, dump(a, s, c, q, at), dump(b, s, c, q, at), "search %q", q)
			ci := `SELECT item, memory_id, kind, label, score, first_at, words, text FROM mneme.context_items($1, $2, 300, at => $3)`
			require.Equal(t, dump(a, ci, c, q, at), dump(b, ci, c, q, at), "context_items %q", q)
		}
		ids := dump(a, `SELECT id FROM mneme.memories WHERE conversation_id = $1 ORDER BY id`, c)
		require.Equal(t, ids, dump(b, `SELECT id FROM mneme.memories WHERE conversation_id = $1 ORDER BY id`, c))
		for _, id := range strings.Split(ids, "\n") {
			in := `SELECT memory_id, conversation_id, kind, status, status_reason, label, pinned, summary, content, stability, difficulty,
				last_reviewed_at, review_count, supersedes_id, superseded_by, created_at, confidence_score, source_type, source_ref,
				valid_until, last_confirmed_at, confirms_id, invalidates_id, slot, revision
				FROM mneme.inspect($1::uuid) i`
			require.Equal(t, dump(a, in, id), dump(b, in, id), "inspect %s", id)
			// The source messages by their text (their ids differ), read by
			// the conversation (a subquery correlated with the ids is
			// refused by Citus).
			src := `SELECT array_agg(g.content ORDER BY array_position(i.source_message_ids, g.id))
				FROM mneme.inspect($1::uuid) i JOIN mneme.messages g
				  ON g.conversation_id = i.conversation_id AND g.id = ANY (i.source_message_ids)`
			require.Equal(t, dump(a, src, id), dump(b, src, id), "inspect %s: source messages", id)
			h := `SELECT * FROM mneme.history($1::uuid)`
			require.Equal(t, dump(a, h, id), dump(b, h, id), "history %s", id)
		}
	}
}

// mneme.export_conversation, as mneme_app for its own tenant, gives the
// lines `mneme export --conversation` writes.
func TestTransferExportConversationSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, convs := transferSource(t, "array")
	app, _ := src.db.PoolAs(t, "mneme_app")
	rows, err := app.Query(ctx, `SELECT l::text FROM mneme.export_conversation($1) l`, convs[0])
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	fromSQL := strings.Join(lines, "\n") + "\n"
	fromGo := exportAll(t, src.db.URL, transfer.ExportOptions{Conversations: []uuid.UUID{convs[0]}, MnemeVersion: "sql"})
	require.Equal(t, withoutExportTime(t, []byte(fromSQL)), withoutExportTime(t, fromGo))

	// It cannot switch the event triggers off as an import does.
	var events int
	require.NoError(t, app.QueryRow(ctx, `WITH s AS (SELECT set_config('mneme.importing', 'on', false)),
		m AS (SELECT mneme.remember($1, 'A fact written with mneme.importing set.') FROM s)
		SELECT count(*) FROM m`, convs[0]).Scan(&events))
	require.NoError(t, src.db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.memory_events e JOIN mneme.memories m ON m.id = e.memory_id
		WHERE e.event = 'created' AND m.content = 'A fact written with mneme.importing set.'`).Scan(&events))
	require.Equal(t, 1, events, "an application login's writes keep their events")

	// Another tenant's conversation is not there for it.
	_, err = src.db.Pool.Exec(ctx, `SELECT mneme.create_tenant('other')`)
	require.NoError(t, err)
	tx, err := app.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	_, err = tx.Exec(ctx, `SELECT mneme.set_tenant('other')`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT count(*) FROM mneme.export_conversation($1)`, convs[0])
	require.Error(t, err)
	require.Equal(t, "P0002", sqlState(t, err))
}

// fileLines splits an export into its lines (no trailing empty one).
func fileLines(file []byte) []string {
	return strings.Split(strings.TrimSuffix(string(file), "\n"), "\n")
}

func joinLines(lines []string) []byte { return []byte(strings.Join(lines, "\n") + "\n") }

// Bad files get an error naming the line, and the conversation the bad
// line is in stays as it was; the conversations before it are in, and
// the good file imported afterwards resumes. Run as mneme_admin.
func TestTransferBadFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, convs := transferSource(t, "array")
	good := exportAll(t, src.db.URL, transfer.ExportOptions{})
	want := withoutExportTime(t, good)
	lines := fileLines(good)
	// Conversations are in id order: the second one's first line.
	sort := convs[0].String() > convs[1].String()
	firstConv, secondConv := convs[0], convs[1]
	if sort {
		firstConv, secondConv = convs[1], convs[0]
	}
	secondAt, memoryInSecond := -1, -1
	for i, l := range lines {
		if strings.Contains(l, `"type": "conversation"`) && strings.Contains(l, secondConv.String()) {
			secondAt = i
		}
		if secondAt >= 0 && memoryInSecond < 0 && strings.Contains(l, `"type": "memory"`) {
			memoryInSecond = i
		}
	}
	reviewAt := -1 // a review line with evidence
	for i, l := range lines {
		if reviewAt < 0 && strings.Contains(l, `"type": "review"`) && strings.Contains(l, `"evidence": {`) {
			reviewAt = i
		}
	}
	require.Positive(t, secondAt)
	require.Positive(t, memoryInSecond)
	require.Positive(t, reviewAt, "a review with evidence")
	count := func(db *dbtest.DB, c uuid.UUID) int {
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.memories WHERE conversation_id = $1`, c).Scan(&n))
		return n
	}

	cases := []struct {
		name     string
		file     []byte
		line     int    // the line the error names (1-based)
		msg      string // in the error
		imported bool   // the first conversation is in afterwards
	}{
		{"truncated in a line", joinLines(append(append([]string{}, lines[:memoryInSecond]...), lines[memoryInSecond][:40])),
			memoryInSecond + 1, "", true},
		{"truncated between lines", joinLines(lines[:memoryInSecond+1]), memoryInSecond + 2, "ends without its end line", true},
		{"wrong version", joinLines(append([]string{strings.Replace(lines[0], `"version": 1`, `"version": 2`, 1)}, lines[1:]...)),
			1, "format version 2 is not supported", false},
		{"a line failing validation", joinLines(append(append(append([]string{}, lines[:memoryInSecond]...),
			strings.Replace(lines[memoryInSecond], `"status": "`, `"status": "bogus`, 1)), lines[memoryInSecond+1:]...)),
			memoryInSecond + 1, `status "bogus`, true},
		{"an unknown field", joinLines(append(append(append([]string{}, lines[:memoryInSecond]...),
			strings.Replace(lines[memoryInSecond], `{"id": `, `{"colour": "red", "id": `, 1)), lines[memoryInSecond+1:]...)),
			memoryInSecond + 1, `unknown field "colour"`, true},
		{"review evidence not an object", joinLines(append(append(append([]string{}, lines[:reviewAt]...),
			withField(t, lines[reviewAt], "evidence", "rated so")), lines[reviewAt+1:]...)),
			reviewAt + 1, "review evidence must be a JSON object", reviewAt > secondAt},
		{"a lost line", joinLines(append(append([]string{}, lines[:memoryInSecond]...), lines[memoryInSecond+1:]...)),
			secondAt + 1, "a line lost?", true},
		{"gzipped and truncated", gzipped(t, good)[:len(gzipped(t, good))*2/3], -1, "unexpected EOF", true},
		{"a lost last line", joinLines(append(append([]string{}, lines[:len(lines)-2]...), lines[len(lines)-1])),
			len(lines) - 1, "the end line counts", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dst := dbtest.New(t, dbtest.WithVector("array"))
			admin := dst.As(t, "mneme_admin")
			_, err := importFile(t, admin, c.file, transfer.ImportOptions{Settings: true})
			require.Error(t, err)
			require.ErrorIs(t, err, transfer.ErrFormat)
			if c.line > 0 {
				require.Contains(t, err.Error(), fmt.Sprintf("line %d:", c.line))
			}
			require.Contains(t, err.Error(), c.msg)
			if c.name != "a lost last line" {
				require.Zero(t, count(dst, secondConv), "the conversation of the bad line is not imported")
			}
			if c.name != "gzipped and truncated" { // where a deflate stream breaks is its own
				require.Equal(t, c.imported, count(dst, firstConv) > 0)
			}
			// The good file afterwards: the import resumes.
			res, err := importFile(t, admin, good, transfer.ImportOptions{Settings: true})
			require.NoError(t, err)
			if c.imported && c.name != "gzipped and truncated" {
				require.Positive(t, res.Skipped)
			}
			require.Equal(t, want, withoutExportTime(t, exportAll(t, dst.URL, transfer.ExportOptions{})))
		})
	}

	t.Run("colliding ids", func(t *testing.T) {
		dst := dbtest.New(t, dbtest.WithVector("array"))
		admin := dst.As(t, "mneme_admin")
		_, err := importFile(t, admin, good, transfer.ImportOptions{Tenant: "acme"})
		require.NoError(t, err)
		// The same ids into another tenant: refused, naming the line.
		_, err = importFile(t, admin, good, transfer.ImportOptions{Tenant: "beta"})
		require.ErrorIs(t, err, transfer.ErrCollision)
		require.Contains(t, err.Error(), "belongs to another tenant")
		// A new conversation id but the memories' ids: the memory line.
		moved := bytes.ReplaceAll(good, []byte(firstConv.String()), []byte(uuid.New().String()))
		movedLines := fileLines(moved)
		memLine := -1
		for i, l := range movedLines {
			if strings.Contains(l, `"type": "memory"`) {
				memLine = i + 1
				break
			}
		}
		_, err = importFile(t, admin, moved, transfer.ImportOptions{Tenant: "beta"})
		require.ErrorIs(t, err, transfer.ErrCollision)
		require.Contains(t, err.Error(), fmt.Sprintf("line %d:", memLine))
		var n int
		require.NoError(t, dst.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.memories WHERE tenant_id = 'beta'`).Scan(&n))
		require.Zero(t, n, "nothing of the refused conversation is in")
		// With new ids the file goes in, twice.
		for range 2 {
			res, err := importFile(t, admin, good, transfer.ImportOptions{Tenant: "beta", NewIDs: true})
			require.NoError(t, err)
			require.EqualValues(t, 3, res.Conversations, "two conversations and the one erased whole")
		}
		var acme, beta int
		require.NoError(t, dst.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE tenant_id = 'acme'), count(*) FILTER (WHERE tenant_id = 'beta')
			FROM mneme.memories`).Scan(&acme, &beta))
		require.Equal(t, 2*acme, beta)
		// The copies answer like the original.
		var ids [2]uuid.UUID
		require.NoError(t, dst.Pool.QueryRow(ctx, `SELECT (SELECT id FROM mneme.message_queue WHERE tenant_id = 'acme' ORDER BY id LIMIT 1),
			(SELECT id FROM mneme.message_queue WHERE tenant_id = 'beta' ORDER BY id LIMIT 1)`).Scan(&ids[0], &ids[1]))
	})
}

// withField is the JSON line with key set to v.
func withField(t *testing.T, line, key string, v any) string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(line), &m))
	m[key] = v
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return string(b)
}

// A mem0 export in the documented shape (a list of get_all's memory
// objects): each becomes a remembered memory, one conversation per user,
// with its time and the mem0 object as provenance, and a revise job; a
// second import adds nothing; a bad memory stops the import before any
// write, naming it.
func TestTransferMem0(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	admin := db.As(t, "mneme_admin")
	file, err := os.ReadFile("testdata/mem0-export.json")
	require.NoError(t, err)
	run := func(b []byte, o transfer.Mem0Options) (transfer.Mem0Result, error) {
		conn, err := pgx.Connect(ctx, admin)
		require.NoError(t, err)
		defer conn.Close(ctx)
		return transfer.ImportMem0(ctx, conn, bytes.NewReader(b), o)
	}
	res, err := run(file, transfer.Mem0Options{Tenant: "acme"})
	require.NoError(t, err)
	require.EqualValues(t, 3, res.Memories)
	require.Len(t, res.Conversations, 2)
	alex := res.Conversations["user:alex"]
	require.NotEqual(t, uuid.Nil, alex)

	var n int
	var created time.Time
	var sourceType, ref, hash string
	var conf float32
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) OVER (), created_at, source_type, source_ref, metadata #>> '{mem0,hash}', confidence_score
		FROM mneme.memories WHERE conversation_id = $1 AND tenant_id = 'acme' AND content = 'Travelling to Paris in May'`, alex).
		Scan(&n, &created, &sourceType, &ref, &hash, &conf))
	require.True(t, created.Equal(time.Date(2023, 2, 26, 6, 57, 0, 108347000, time.UTC)), created)
	require.Equal(t, "import", sourceType)
	require.Equal(t, "mem0:f38b689d-6b24-45b7-bced-17fbb4d8bac7", ref)
	require.Equal(t, "62bc074f56d1f909f1b4c2b639f56f6a", hash)
	require.InDelta(t, 0.8, conf, 1e-6)
	var cat string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT metadata #>> '{mem0,metadata,category}' FROM mneme.memories
		WHERE conversation_id = $1 AND content LIKE 'Is vegetarian%'`, alex).Scan(&cat))
	require.Equal(t, "food", cat)
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.jobs WHERE kind = 'revise' AND tenant_id = 'acme'`).Scan(&n))
	require.Equal(t, 3, n, "each memory is revised like any write")
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.memory_events WHERE event = 'created' AND tenant_id = 'acme'`).Scan(&n))
	require.Equal(t, 3, n)

	// Again, and as get_all's {"results": [...]}: nothing new.
	res, err = run([]byte(`{"results": `+string(file)+`, "count": 3}`), transfer.Mem0Options{Tenant: "acme"})
	require.NoError(t, err)
	require.EqualValues(t, 0, res.Memories)
	require.EqualValues(t, 3, res.Skipped)

	// By agent: the memory without an agent goes to the conversation of none.
	res, err = run(file, transfer.Mem0Options{Tenant: "agents", By: "agent"})
	require.NoError(t, err)
	require.Contains(t, res.Conversations, "agent:travel-agent")

	// The revise jobs run as for any write: a memory stated twice (two mem0
	// ids, one text) merges into one.
	dup := `[{"id": "d1", "memory": "Has a cat named Miso", "user_id": "sam", "created_at": "2024-01-01T00:00:00Z"},
		{"id": "d2", "memory": "Has a cat named Miso", "user_id": "sam", "created_at": "2024-02-01T00:00:00Z"}]`
	res, err = run([]byte(dup), transfer.Mem0Options{Tenant: "acme"})
	require.NoError(t, err)
	require.EqualValues(t, 2, res.Memories)
	sam := res.Conversations["user:sam"]
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	drainJobs(t, db.Pool, pipeline.Deps{Embedder: embed.NewHash(config.DefaultEmbedDim), Log: log}, log)
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'merged') FROM mneme.memories
		WHERE conversation_id = $1`, sam).Scan(&n))
	require.Equal(t, 1, n, "the restatement merged into the first")

	// Bad files: nothing written.
	for name, bad := range map[string]string{
		"no memory text": `[{"id": "a", "memory": "ok"}, {"id": "b", "memory": "  "}]`,
		"a bad time":     `[{"id": "a", "memory": "ok", "created_at": "yesterday"}]`,
		"truncated":      string(file[:len(file)/2]),
		"not a list":     `"hello"`,
	} {
		_, err := run([]byte(bad), transfer.Mem0Options{Tenant: "bad"})
		require.ErrorIs(t, err, transfer.ErrFormat, name)
	}
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.memories WHERE tenant_id = 'bad'`).Scan(&n))
	require.Zero(t, n)
}

// A file without embeddings (or of another model) imported where an
// external embedder is configured: each conversation's memories and its
// episodes' messages are embedded through it after the conversation
// commits, as the sidecar would have.
func TestTransferExternalEmbedder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, _ := transferSource(t, "array")
	file := exportAll(t, src.db.URL, transfer.ExportOptions{Embeddings: true})
	srv := llmtest.New(t)
	dst := dbtest.New(t, dbtest.WithVector("array"))
	_, err := dst.Pool.Exec(ctx, `SELECT mneme.set_setting('embedder', '"external"')`)
	require.NoError(t, err)
	emb := embed.NewOpenAI(config.Endpoint{BaseURL: srv.URL(), Model: "fake-embed", APIKey: "k"}, config.DefaultEmbedDim)
	res, err := importFile(t, dst.As(t, "mneme_admin"), file, transfer.ImportOptions{Embedder: emb, Model: "fake-embed"})
	require.NoError(t, err)
	require.False(t, res.KeptEmbedding, "the file's model is hash, the target's fake-embed")
	var memories, missing, episodeMessages, messagesMissing int
	require.NoError(t, dst.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE embedding IS NULL) FROM mneme.memories`).Scan(&memories, &missing))
	require.NoError(t, dst.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE embedding IS NULL) FROM mneme.messages
		WHERE memory_id IS NOT NULL`).Scan(&episodeMessages, &messagesMissing))
	require.Positive(t, memories)
	require.Zero(t, missing, "every memory embedded")
	require.Positive(t, episodeMessages)
	require.Zero(t, messagesMissing, "every episode message embedded")
	require.EqualValues(t, memories, res.Embedded)
	require.NotEmpty(t, srv.EmbedRequests())
	// The same model on both sides: the file's embeddings are kept.
	again := exportAll(t, dst.URL, transfer.ExportOptions{Embeddings: true, Model: "fake-embed"})
	dst2 := dbtest.New(t, dbtest.WithVector("array"))
	_, err = dst2.Pool.Exec(ctx, `SELECT mneme.set_setting('embedder', '"external"')`)
	require.NoError(t, err)
	before := len(srv.EmbedRequests())
	res, err = importFile(t, dst2.URL, again, transfer.ImportOptions{Embedder: emb, Model: "fake-embed"})
	require.NoError(t, err)
	require.True(t, res.KeptEmbedding)
	require.Len(t, srv.EmbedRequests(), before, "nothing re-embedded")
	require.Equal(t, withoutExportTime(t, again), withoutExportTime(t, exportAll(t, dst2.URL, transfer.ExportOptions{Embeddings: true, Model: "fake-embed"})))
}

// A file moves between the vector variants: exported from one, imported
// into the other (embeddings kept: the same model and dimension), it
// exports the same but for the header's variant.
func TestTransferAcrossVariants(t *testing.T) {
	t.Parallel()
	if !dbtest.HasPgvector(t) {
		t.Skip("pgvector is not installed on the test server")
	}
	src, convs := transferSource(t, "array")
	first := exportAll(t, src.db.URL, transfer.ExportOptions{Embeddings: true})
	dst := dbtest.New(t, dbtest.WithVector("pgvector"))
	res, err := importFile(t, dst.URL, first, transfer.ImportOptions{Settings: true})
	require.NoError(t, err)
	require.True(t, res.KeptEmbedding)
	second := exportAll(t, dst.URL, transfer.ExportOptions{Embeddings: true})
	require.Equal(t, strings.Replace(withoutExportTime(t, first), `"vector_variant": "array"`, `"vector_variant": "pgvector"`, 1),
		withoutExportTime(t, second))
	sameAnswers(t, src.db.Pool, dst.Pool, convs)
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(b)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// --defer-index: the pgvector HNSW index is dropped for the import and
// built again after it, from its own definition, also when the import
// fails; an admin (not the table's owner) is refused before anything.
func TestTransferDeferIndex(t *testing.T) {
	t.Parallel()
	if !dbtest.HasPgvector(t) {
		t.Skip("pgvector is not installed on the test server")
	}
	ctx := context.Background()
	src, convs := transferSource(t, "pgvector")
	file := exportAll(t, src.db.URL, transfer.ExportOptions{})
	dst := dbtest.New(t, dbtest.WithVector("pgvector"))
	indexDef := func() string {
		var def string
		require.NoError(t, dst.Pool.QueryRow(ctx, `SELECT coalesce(pg_get_indexdef(to_regclass('mneme.memories_embedding_hnsw')), '')`).Scan(&def))
		return def
	}
	want := indexDef()
	require.NotEmpty(t, want)
	_, err := importFile(t, dst.As(t, "mneme_admin"), file, transfer.ImportOptions{DeferIndex: true})
	require.ErrorContains(t, err, "defer-index")
	require.Equal(t, want, indexDef())
	// A bad file: the index is built again all the same.
	_, err = importFile(t, dst.URL, file[:len(file)/2], transfer.ImportOptions{DeferIndex: true})
	require.ErrorIs(t, err, transfer.ErrFormat)
	require.Equal(t, want, indexDef())
	// Interrupted (the context cancelled while the file is half read).
	cctx, cancel := context.WithCancel(ctx)
	conn, err := pgx.Connect(ctx, dst.URL)
	require.NoError(t, err)
	go func() { time.Sleep(300 * time.Millisecond); cancel() }()
	_, err = transfer.Import(cctx, conn, io.MultiReader(bytes.NewReader(file[:len(file)/2]), ctxReader{cctx}), transfer.ImportOptions{DeferIndex: true})
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, conn.Close(ctx))
	require.Equal(t, want, indexDef())
	_, err = importFile(t, dst.URL, file, transfer.ImportOptions{DeferIndex: true, Settings: true})
	require.NoError(t, err)
	require.Equal(t, want, indexDef())
	require.Equal(t, withoutExportTime(t, file), withoutExportTime(t, exportAll(t, dst.URL, transfer.ExportOptions{})))
	sameAnswers(t, src.db.Pool, dst.Pool, convs)
}

// ctxReader blocks until its context ends, then fails with its error.
type ctxReader struct{ ctx context.Context }

func (r ctxReader) Read([]byte) (int, error) {
	<-r.ctx.Done()
	return 0, r.ctx.Err()
}

// checkCounts parses an export and checks every conversation's announced
// line counts and the end line against the lines that follow: what an
// export written across several snapshots would get wrong.
func checkCounts(t *testing.T, file []byte) (memories int) {
	t.Helper()
	type counts struct{ Messages, Memories, Reviews, Events int }
	var want, got counts
	var open bool
	lines := fileLines(file)
	closeConv := func() {
		if open {
			require.Equal(t, want, got)
		}
	}
	for _, l := range lines[1:] {
		var v struct {
			Type  string
			Lines json.RawMessage
		}
		require.NoError(t, json.Unmarshal([]byte(l), &v))
		switch v.Type {
		case "conversation":
			closeConv()
			want, got, open = counts{}, counts{}, true
			require.NoError(t, json.Unmarshal(v.Lines, &want))
		case "message":
			got.Messages++
		case "memory":
			got.Memories++
			memories++
		case "review":
			got.Reviews++
		case "event":
			got.Events++
		case "end":
			closeConv()
		}
	}
	return memories
}

// The export reads one snapshot: a writer adds one memory to each of three
// conversations per transaction all along, and every file holds as many
// memories in each (a file read at several moments would hold more in the
// conversations it read later), with counts that agree with its lines.
func TestTransferExportIsOneSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t, dbtest.WithVector("array"))
	convs := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	for _, c := range convs {
		_, err := db.Pool.Exec(ctx, `SELECT mneme.remember($1, 'seed ' || i) FROM generate_series(1, 200) i`, c)
		require.NoError(t, err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan int)
	go func() {
		n := 0
		for wctx.Err() == nil {
			if _, err := db.Pool.Exec(wctx, `SELECT mneme.remember(c, 'written during the export ' || $2::int) FROM unnest($1::uuid[]) c`,
				convs, n); err == nil {
				n++
			}
		}
		done <- n
	}()
	var sizes []int
	for range 5 {
		file := exportAll(t, db.URL, transfer.ExportOptions{})
		sizes = append(sizes, checkCounts(t, file))
		per := map[string]int{}
		for _, l := range fileLines(file) {
			if strings.Contains(l, `"type": "memory"`) {
				per[l[strings.Index(l, `"conversation": "`)+17:][:36]]++
			}
		}
		require.Len(t, per, 3)
		for _, c := range convs {
			require.Equal(t, per[convs[0].String()], per[c.String()], "every conversation as of one moment: %v", per)
		}
	}
	stop()
	written := <-done
	require.Positive(t, written, "the writer wrote during the exports")
	require.Less(t, sizes[0], sizes[len(sizes)-1], "the exports saw the writes")
	t.Logf("memories per export %v, %d transactions written meanwhile", sizes, written)
}

// A lineage link across conversations (revision_scope tenant) to a memory
// of a conversation later in the file is set when that one comes in, also
// when the import was interrupted between the two and resumed.
func TestTransferLinksAcrossConversations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := dbtest.New(t, dbtest.WithVector("array"))
	a, b := uuid.New(), uuid.New()
	if a.String() > b.String() {
		a, b = b, a
	}
	var older, newer uuid.UUID
	require.NoError(t, src.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'The user lives in Oslo.')`, b).Scan(&older))
	require.NoError(t, src.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'The user lives in Bergen.')`, a).Scan(&newer))
	// As a tenant-scope revision links them (the superuser writes it here).
	_, err := src.Pool.Exec(ctx, `UPDATE mneme.memories SET supersedes_id = $2 WHERE id = $1`, newer, older)
	require.NoError(t, err)
	file := exportAll(t, src.URL, transfer.ExportOptions{})
	lines := fileLines(file)
	cut := -1
	for i, l := range lines {
		if strings.Contains(l, `"type": "conversation"`) && strings.Contains(l, b.String()) {
			cut = i
		}
	}
	require.Positive(t, cut)

	whole := dbtest.New(t, dbtest.WithVector("array"))
	res, err := importFile(t, whole.URL, file, transfer.ImportOptions{Settings: true})
	require.NoError(t, err)
	require.Zero(t, res.DroppedLinks)
	require.Equal(t, withoutExportTime(t, file), withoutExportTime(t, exportAll(t, whole.URL, transfer.ExportOptions{})))

	resumed := dbtest.New(t, dbtest.WithVector("array"))
	_, err = importFile(t, resumed.URL, joinLines(lines[:cut+1]), transfer.ImportOptions{Settings: true})
	require.ErrorContains(t, err, "ends without its end line")
	var link *uuid.UUID
	require.NoError(t, resumed.Pool.QueryRow(ctx, `SELECT supersedes_id FROM mneme.memories WHERE id = $1`, newer).Scan(&link))
	require.Nil(t, link, "its target is not in yet")
	res, err = importFile(t, resumed.URL, file, transfer.ImportOptions{Settings: true})
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Skipped)
	require.Zero(t, res.DroppedLinks)
	require.Equal(t, withoutExportTime(t, file), withoutExportTime(t, exportAll(t, resumed.URL, transfer.ExportOptions{})))
}

// Erase is final for a mem0 import too (issue 47): a memory imported from
// mem0 and erased does not come back when the same file is imported again
// (its tombstone keeps the mem0 id, no content), nor do the memories of a
// mem0 user whose conversation was erased whole; the import counts them as
// erased, and the other memories stay as they were.
func TestTransferMem0ReimportKeepsErased(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	admin := db.As(t, "mneme_admin")
	file, err := os.ReadFile("testdata/mem0-export.json")
	require.NoError(t, err)
	run := func(b []byte, o transfer.Mem0Options) (transfer.Mem0Result, error) {
		conn, err := pgx.Connect(ctx, admin)
		require.NoError(t, err)
		defer conn.Close(ctx)
		return transfer.ImportMem0(ctx, conn, bytes.NewReader(b), o)
	}
	res, err := run(file, transfer.Mem0Options{Tenant: "acme"})
	require.NoError(t, err)
	require.EqualValues(t, 3, res.Memories)
	alex := res.Conversations["user:alex"]
	count := func(q string, args ...any) int {
		t.Helper()
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx, q, args...).Scan(&n))
		return n
	}
	var paris uuid.UUID
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT id FROM mneme.memories WHERE conversation_id = $1 AND content = 'Travelling to Paris in May'`, alex).Scan(&paris))
	_, err = db.Pool.Exec(ctx, `SELECT mneme.set_tenant('acme'), mneme.erase($1, 'user request')`, paris)
	require.NoError(t, err)
	require.Equal(t, 1, count(`SELECT count(*) FROM mneme.memory_events WHERE memory_id = $1 AND event = 'erased'
		AND source_ref = 'mem0:f38b689d-6b24-45b7-bced-17fbb4d8bac7'`, paris), "the tombstone keeps the mem0 id")

	res, err = run(file, transfer.Mem0Options{Tenant: "acme"})
	require.NoError(t, err)
	require.EqualValues(t, 0, res.Memories, "nothing comes back")
	require.EqualValues(t, 1, res.Erased)
	require.EqualValues(t, 2, res.Skipped)
	require.Zero(t, count(`SELECT count(*) FROM mneme.memories WHERE content ILIKE '%paris%'`))

	// The whole conversation of a mem0 user erased: none of its memories come back.
	_, err = db.Pool.Exec(ctx, `SELECT mneme.set_tenant('acme'), mneme.erase_conversation($1, 'user request')`, alex)
	require.NoError(t, err)
	res, err = run(file, transfer.Mem0Options{Tenant: "acme"})
	require.NoError(t, err)
	require.EqualValues(t, 0, res.Memories)
	require.Zero(t, count(`SELECT count(*) FROM mneme.memories WHERE conversation_id = $1`, alex))
	require.Positive(t, res.Erased)

	// Straight through SQL, as psql would: NULL, and the function says why.
	var id *uuid.UUID
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.set_tenant('acme'), mneme.import_fact($1, 'Travelling to Paris in May', NULL,
		'{"mem0": {"id": "f38b689d-6b24-45b7-bced-17fbb4d8bac7"}}')`, alex).Scan(new(any), &id))
	require.Nil(t, id)
	var erased bool
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.set_tenant('acme'), mneme.import_source_erased($1, 'mem0:f38b689d-6b24-45b7-bced-17fbb4d8bac7')`, alex).Scan(new(any), &erased))
	require.True(t, erased)
	_, err = db.Pool.Exec(ctx, `SELECT mneme.import_source_erased(NULL, 'x')`)
	require.Equal(t, "22004", sqlState(t, err))
}
