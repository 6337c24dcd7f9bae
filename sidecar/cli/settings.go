package cli

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Settings collects repeated --set key=JSON flags (mneme settings for an
// evaluation's run).
type Settings []string

func (s *Settings) String() string     { return strings.Join(*s, ",") }
func (s *Settings) Set(v string) error { *s = append(*s, v); return nil }

// Parse checks every key=JSON pair (a usage error otherwise).
func (s Settings) Parse() (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	for _, kv := range s {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !json.Valid([]byte(v)) {
			return nil, fmt.Errorf("%w: --set %q: want key=JSON, e.g. segment_max_messages=20 or embedder='\"hash\"'", ErrUsage, kv)
		}
		out[strings.TrimSpace(k)] = json.RawMessage(v)
	}
	return out, nil
}

// Choices collects --choose key=v1|v2|...: the values of one setting the
// cross-validation may choose among (JSON each, as --set takes them).
// Package recall makes the candidates of them.
type Choices map[string][]string

func (c *Choices) String() string { return fmt.Sprint(map[string][]string(*c)) }

func (c *Choices) Set(s string) error {
	k, vs, ok := strings.Cut(s, "=")
	if !ok || k == "" || vs == "" {
		return fmt.Errorf("want key=value1|value2|..., e.g. context_window=1|2|3")
	}
	if *c == nil {
		*c = Choices{}
	}
	if _, dup := (*c)[k]; dup {
		return fmt.Errorf("--choose %s given twice", k)
	}
	for _, v := range strings.Split(vs, "|") {
		if v == "" {
			return fmt.Errorf("--choose %s: an empty value", k)
		}
		(*c)[k] = append((*c)[k], v)
	}
	return nil
}
