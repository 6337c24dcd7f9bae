// Package clip shortens text for what quotes it: log lines, error
// messages, prompts and report columns. One rule everywhere: at most n
// runes, ending in "…" when cut, never inside a UTF-8 sequence, at a word
// boundary when there is one in the second half.
package clip

import "strings"

// String returns s (trimmed of surrounding white space) if it has at most n
// runes, else its first runes up to a word boundary when one falls in the
// second half, followed by "…", n runes in all at most. n < 1 gives "".
func String(s string, n int) string {
	if n < 1 {
		return ""
	}
	r := []rune(strings.TrimSpace(s))
	if len(r) <= n {
		return string(r)
	}
	cut := r[:n-1]
	for i := len(cut) - 1; i > (n-1)/2; i-- {
		if cut[i] == ' ' {
			cut = cut[:i]
			break
		}
	}
	return strings.TrimRight(string(cut), " ") + "…"
}
