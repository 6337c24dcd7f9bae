package stem

import "testing"

// Words that must meet, and words that must not be cut down.
func TestWord(t *testing.T) {
	meet := [][]string{
		{"lifetime", "lifetimes"},
		{"smoke", "smokes", "smoking"},
		{"program", "programs", "programming"},
		{"drop", "dropped", "drops"},
		{"city", "cities"},
		{"churches", "church"},
		{"garden", "gardens", "gardening"},
	}
	for _, group := range meet {
		want := Word(group[0])
		for _, w := range group[1:] {
			if got := Word(w); got != want {
				t.Errorf("Word(%q) = %q, Word(%q) = %q: they should meet", w, got, group[0], want)
			}
		}
	}
	// Short words keep their endings: "sing" is not "s" + "ing".
	same := []string{"glass", "bus", "tree", "time", "sing", "red", "was", "hiking"}
	for _, w := range same {
		if got := Word(w); got != w {
			t.Errorf("Word(%q) = %q, want it unchanged", w, got)
		}
	}
}
