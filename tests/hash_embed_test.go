package tests

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/embed"
)

// hashCorpus: Unicode (accents, Greek, Cyrillic, CJK, emoji, combining
// marks, full-width forms, Unicode spaces, non-BMP capitals), punctuation,
// mixed case and long texts, fixed and random.
func hashCorpus() []string {
	c := []string{
		"Hello, World!",
		"hello world",
		"The QUICK brown fox -- jumps over the lazy dog; again & again...",
		"Crème Brûlée à la française, s'il vous plaît.",
		"ΟΔΟΣ Ελληνικά ΣΊΣΥΦΟΣ",
		"Привет, МИР! Ёлка",
		"東京タワーは高いです。日本語のテキスト、句読点も。",
		"中文文本：你好，世界！",
		"한국어 텍스트 안녕하세요",
		"emoji 😀🎉👩‍👩‍👧 party 🇩🇪",
		"e\u0301te\u0301 (decomposed) vs été",
		"ＦＵＬＬＷＩＤＴＨ　ｔｅｘｔ！",
		"İstanbul ıI KELVIN \u212a ẞtraße",
		"𐐀𐐁 Deseret 𐐨",
		"tabs\tand\nnewlines\r\nand\u00a0nbsp\u2003em-space",
		"?!",
		"... --- ...",
		"x",
		"3.14159 42 1e10 v2.0.1",
		"user@example.com https://example.org/a/b?c=d#e",
		"snake_case camelCase kebab-case",
		strings.Repeat("Long text about memory systems and retrieval. ", 400),
	}
	r := rand.New(rand.NewPCG(1, 2))
	pools := [][2]rune{{'a', 'z'}, {'A', 'Z'}, {'0', '9'}, {' ', '/'}, {0xC0, 0x24F}, {0x370, 0x3FF},
		{0x400, 0x4FF}, {0x3040, 0x30FF}, {0x4E00, 0x4FFF}, {0x1F600, 0x1F64F}, {0x2000, 0x206F},
		{0xFF01, 0xFF5E}, {0x300, 0x36F}, {0x10400, 0x1044F}, {0x1E00, 0x1EFF}}
	for i := 0; i < 200; i++ {
		n := 1 + r.IntN(300)
		if i%50 == 0 {
			n = 20000
		}
		var b strings.Builder
		for b.Len() < n {
			if r.IntN(6) == 0 {
				b.WriteByte(' ')
				continue
			}
			p := pools[r.IntN(len(pools))]
			b.WriteRune(p[0] + r.Int32N(p[1]-p[0]+1))
		}
		c = append(c, b.String())
	}
	// Tokens longer than embed.MaxTokenRunes are cut the same way.
	return append(c, strings.Repeat("z", 100000), strings.Repeat("é", 100)+" mot", "a "+strings.Repeat("Ω", 65)+" b",
		strings.Repeat("ab", 32)+" "+strings.Repeat("ab", 33))
}

func TestHashEmbedSQLEqualsGo(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t, dbtest.WithVector("array"))
	ctx := context.Background()
	for _, dim := range []int{256, 7} {
		h := embed.NewHash(dim)
		for i, text := range hashCorpus() {
			want, err := h.EmbedOne(text)
			var got []float32
			if errors.Is(err, embed.ErrEmptyText) {
				// Random text of only Unicode spaces: both sides reject it.
				require.Equal(t, "22023", sqlState(t, db.Pool.QueryRow(ctx, `SELECT mneme.hash_embed($1, $2)`, text, dim).Scan(&got)))
				continue
			}
			require.NoError(t, err, "go embed text %d", i)
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.hash_embed($1, $2)`, text, dim).Scan(&got), "sql embed text %d", i)
			require.Len(t, got, dim)
			for j := range want {
				require.InDelta(t, want[j], got[j], 1e-6, "text %d %.40q component %d (dim %d)", i, text, j, dim)
			}
		}
	}
	// The one-argument form uses setting embedding_dim.
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT array_length(mneme.hash_embed('abc'), 1)`).Scan(&n))
	require.Equal(t, embed.DefaultDim, n)
}

func TestHashEmbedRejectsEmptyText(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t, dbtest.WithVector("array"))
	ctx := context.Background()
	for _, text := range []string{"", "   ", "\t\n", "\u00a0\u3000\u2003"} {
		_, err := db.Pool.Exec(ctx, `SELECT mneme.hash_embed($1)`, text)
		require.Equal(t, "22023", sqlState(t, err))
	}
	_, err := db.Pool.Exec(ctx, `SELECT mneme.hash_embed(NULL)`)
	require.Equal(t, "22004", sqlState(t, err)) // NULL where a value is needed (docs/sql-api.md)
	_, err = db.Pool.Exec(ctx, `SELECT mneme.hash_embed('abc', 1)`)
	require.Equal(t, "22023", sqlState(t, err))
}

// A plain INSERT gets the hash embedding of its text; a text change
// re-embeds; an explicit embedding is kept; embedder "external" leaves it NULL.
func TestHashEmbedTrigger(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			db := dbtest.New(t, dbtest.WithVector(variant))
			ctx := context.Background()
			h := embed.NewHash(embed.DefaultDim)
			conv := uuid.New()
			embedding := func(id uuid.UUID) []float32 {
				var v []float32
				require.NoError(t, db.Pool.QueryRow(ctx, `SELECT embedding::real[] FROM mneme.memories WHERE id = $1`, id).Scan(&v))
				return v
			}
			var id uuid.UUID
			require.NoError(t, db.Pool.QueryRow(ctx, `INSERT INTO mneme.memories (conversation_id, title, content)
				VALUES ($1, 'Trip', 'Alice flies to Lisbon in May') RETURNING id`, conv).Scan(&id))
			want, _ := h.EmbedOne(embed.MemoryText("Trip", "", "Alice flies to Lisbon in May"))
			requireVecNear(t, want, embedding(id))

			_, err := db.Pool.Exec(ctx, `UPDATE mneme.memories SET summary = 'travel plans' WHERE id = $1`, id)
			require.NoError(t, err)
			want, _ = h.EmbedOne(embed.MemoryText("Trip", "travel plans", "Alice flies to Lisbon in May"))
			requireVecNear(t, want, embedding(id))

			// mneme.remember writes the content as the summary too: it counts once.
			var rid uuid.UUID
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'Bob likes green tea')`, conv).Scan(&rid))
			w2, _ := h.EmbedOne("Bob likes green tea")
			requireVecNear(t, w2, embedding(rid))

			// An update that leaves the text alone keeps the embedding.
			_, err = db.Pool.Exec(ctx, `UPDATE mneme.memories SET pinned = true WHERE id = $1`, id)
			require.NoError(t, err)
			requireVecNear(t, want, embedding(id))

			explicit := make([]float32, embed.DefaultDim)
			explicit[0] = 1
			require.NoError(t, db.Pool.QueryRow(ctx, `INSERT INTO mneme.memories (conversation_id, content, embedding)
				VALUES ($1, 'explicit', $2::real[]) RETURNING id`, conv, explicit).Scan(&id))
			requireVecNear(t, explicit, embedding(id))

			_, err = db.Pool.Exec(ctx, `SELECT mneme.set_setting('embedder', '"external"')`)
			require.NoError(t, err)
			var isNull bool
			require.NoError(t, db.Pool.QueryRow(ctx, `INSERT INTO mneme.memories (conversation_id, content)
				VALUES ($1, 'no embedder here') RETURNING embedding IS NULL`, conv).Scan(&isNull))
			require.True(t, isNull)
		})
	}
}

func requireVecNear(t *testing.T, want, got []float32) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.InDelta(t, want[i], got[i], 1e-6, "component %d", i)
	}
}

// The segment job embeds its episodes with the hash embedder's Go twin
// (outside the write transaction); what it stores is what the SQL trigger
// would have stored: mneme.hash_embed of the memory's text.
func TestSegmentedEpisodesCarryTheSQLHashEmbedding(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, false)
	e.session(day1, rustSession)
	e.segmentNow()
	e.drain()
	ctx := context.Background()
	rows, err := e.db.Pool.Query(ctx, `SELECT m.embedding::real[], mneme.hash_embed(mneme.memory_text(m.title, m.summary, m.content))
		FROM mneme.memories m WHERE m.conversation_id = $1 AND m.kind = 'episodic'`, e.conv)
	require.NoError(t, err)
	defer rows.Close()
	n := 0
	for rows.Next() {
		var stored, sqlHash []float32
		require.NoError(t, rows.Scan(&stored, &sqlHash))
		require.Len(t, stored, len(sqlHash))
		for i := range stored {
			require.InDelta(t, sqlHash[i], stored[i], 1e-6, "component %d", i)
		}
		n++
	}
	require.NoError(t, rows.Err())
	require.Positive(t, n, "the session became episodes")
}
