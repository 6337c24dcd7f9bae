package embed

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHashUnitNorm(t *testing.T) {
	h := NewHash(64)
	vs, err := h.Embed(context.Background(), []string{"Hello world", "?!", "東京タワー", "a"})
	require.NoError(t, err)
	for _, v := range vs {
		require.Len(t, v, 64)
		var sq float64
		for _, x := range v {
			sq += float64(x) * float64(x)
		}
		require.InDelta(t, 1, sq, 1e-5)
	}
}

func TestHashCaseAndPunctuationInsensitive(t *testing.T) {
	h := NewHash(256)
	a, err := h.EmbedOne("Crème BRÛLÉE, please!")
	require.NoError(t, err)
	b, err := h.EmbedOne("crème brûlée please")
	require.NoError(t, err)
	require.Equal(t, a, b)
}

func TestHashEmptyText(t *testing.T) {
	h := NewHash(16)
	for _, s := range []string{"", "   ", "\t\n", "\u00a0\u3000"} {
		_, err := h.EmbedOne(s)
		require.True(t, errors.Is(err, ErrEmptyText), "%q: %v", s, err)
	}
	_, err := h.Embed(context.Background(), []string{"ok", " "})
	require.ErrorIs(t, err, ErrEmptyText)
	_, err = NewHash(1).EmbedOne("x")
	require.Error(t, err)
}

// The SQL twin splits before folding and folds only non-ASCII tokens; that
// is the same as folding first only if no folded pair changes whether a
// character is a separator or whitespace.
func TestFoldKeepsSeparators(t *testing.T) {
	from, to := []rune(foldFrom), []rune(foldTo)
	require.Equal(t, len(from), len(to))
	for i := range from {
		require.Equal(t, isSeparator(from[i]), isSeparator(to[i]), "%U -> %U", from[i], to[i])
		require.Equal(t, isSpace(from[i]), isSpace(to[i]), "%U -> %U", from[i], to[i])
		if from[i] < 0x80 {
			require.True(t, 'A' <= from[i] && from[i] <= 'Z', "ASCII folds only A-Z (SQL uses lower() in C)")
		}
	}
	for r := rune(1); r < 0x80; r++ {
		require.Equal(t, foldRune(r), []rune(strings.ToLower(string(r)))[0])
	}
}

// The SQL file must carry the same folding table (regenerate both with
// go run ./sidecar/embed/internal/genfold).
func TestFoldTableMatchesSQL(t *testing.T) {
	b, err := os.ReadFile("../../sql/100-hash-fold.sql")
	require.NoError(t, err)
	require.Contains(t, string(b), "'"+foldFrom+"'")
	require.Contains(t, string(b), "'"+foldTo+"'")
}

func TestMemoryText(t *testing.T) {
	require.Equal(t, "t\ns\nc", MemoryText("t", "s", "c"))
	require.Equal(t, "c", MemoryText("", "", "c"))
	require.Equal(t, "t\nc", MemoryText("t", "c", "c"))
}
