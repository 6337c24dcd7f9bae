// Package stem is the one word-ending rule of mneme's offline heuristics
// (the segmenter, the reviewer and the reviser): a plural or an -ing/-ed
// ending trimmed so "lifetimes" meets "lifetime" and "smoking" meets
// "smoke". Deterministic and language-naive on purpose; the SQL side
// (BM25) uses PostgreSQL's own stemmer instead.
package stem

import "strings"

// Word is w (lower-case) with its ending trimmed: "programming" and
// "programs" become "program", "dropped" "drop", "cities" "city", and a
// final silent e goes too, so "smoke", "smokes" and "smoking" meet at
// "smok".
func Word(w string) string {
	s := trimSuffix(w)
	// "programming" -> "programm" -> "program", "dropped" -> "drop"
	if n := len(s); n != len(w) && n >= 4 && s[n-1] == s[n-2] && !strings.ContainsRune("lsz", rune(s[n-1])) {
		s = s[:n-1]
	}
	if n := len(s); n > 4 && s[n-1] == 'e' && s[n-2] != 'e' {
		s = s[:n-1]
	}
	return s
}

func trimSuffix(w string) string {
	switch {
	case strings.HasSuffix(w, "ies") && len(w) > 5:
		return w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "ing") && len(w) > 6:
		return w[:len(w)-3]
	case strings.HasSuffix(w, "ed") && len(w) > 5:
		return w[:len(w)-2]
	case strings.HasSuffix(w, "es") && len(w) > 5 && strings.ContainsAny(w[len(w)-3:len(w)-2], "sxz"):
		return w[:len(w)-2]
	case strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && len(w) > 4:
		return w[:len(w)-1]
	}
	return w
}
