package clip

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestString(t *testing.T) {
	require.Equal(t, "short", String("  short  ", 10))
	require.Equal(t, "", String("anything", 0))
	require.Equal(t, "the quick…", String("the quick brown fox", 12), "at a word boundary")
	require.Equal(t, "abcdefghi…", String("abcdefghijklmnop", 10), "no boundary: at n-1 runes")
	// Never inside a UTF-8 sequence; n counts runes.
	s := strings.Repeat("ü", 50)
	got := String(s, 10)
	require.True(t, utf8.ValidString(got))
	require.Equal(t, 10, utf8.RuneCountInString(got))
	for _, n := range []int{1, 2, 3, 7, 50, 200} {
		for _, in := range []string{strings.Repeat("日本語 ", 40), strings.Repeat("a", 300), "x y z"} {
			out := String(in, n)
			require.True(t, utf8.ValidString(out))
			require.LessOrEqual(t, utf8.RuneCountInString(out), n, "%q %d", in, n)
		}
	}
}
