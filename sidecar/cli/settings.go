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
