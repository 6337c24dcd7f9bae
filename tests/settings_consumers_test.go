package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// One rule per setting, the one its consumer needs (issue 47 item 4 of the
// probe): every registered setting is set through mneme.set_setting to
// values at and past the ends of what its type allows (numbers from -1 to
// 1e308, intervals of zero in disguise such as "0.0000001 seconds",
// "1 day -24 hours" and "P0D", weights at their floors); after each value
// it accepts, cleanup, search, retrieve, context, segmentation and review
// (the sidecar's jobs) all still work. Before, jobs_retention accepted
// "0" and its disguises and cleanup then failed with 22023 for every
// tenant. A value refused must be 22023. MNEME_SETTINGS_ALL=1 runs
// segmentation and review after every value, not only for the settings
// they read.
func TestEverySettingKeepsItsConsumersWorking(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newPipelineEnv(t, false)
	all := os.Getenv("MNEME_SETTINGS_ALL") != ""
	rows, err := e.db.Pool.Query(ctx, `SELECT key, value::text FROM mneme.settings
		WHERE key NOT IN ('vector_variant', 'embedding_dim', 'embedder') ORDER BY key`)
	require.NoError(t, err)
	defaults := map[string]string{}
	var keys []string
	for rows.Next() {
		var k, v string
		require.NoError(t, rows.Scan(&k, &v))
		defaults[k] = v
		keys = append(keys, k)
	}
	require.NoError(t, rows.Err())
	sort.Strings(keys)
	require.Greater(t, len(keys), 30)

	numbers := []string{"-1", "0", "1e-9", "0.001", "0.5", "1", "2", "99", "1000", "100000", "2147483647", "1e308"}
	intervals := []string{`"0"`, `"0.0000001 seconds"`, `"1 day -24 hours"`, `"P0D"`, `"1 microsecond"`, `"1 second"`,
		`"-1 day"`, `"100 years"`, `"1 month -30 days"`, `"1 hour"`}
	base := time.Now().UTC().Add(-30 * 24 * time.Hour)
	turn := 0
	say := func(text string) {
		turn++
		at := base.Add(time.Duration(turn) * time.Minute).Format(time.RFC3339)
		_, err := e.db.Pool.Exec(ctx, `SELECT mneme.add_message($1, 'user', $2, $3::timestamptz)`, e.conv, text, at)
		if err != nil { // a writer may refuse under a limit the setting sets; the consumers below must not fail
			require.Contains(t, []string{"22001", "22023"}, sqlState(t, err), "add_message: %v", err)
		}
	}
	consumers := func(what string, pipeline bool) {
		t.Helper()
		for _, q := range []string{
			`SELECT count(*) FROM mneme.cleanup()`,
			`SELECT count(*) FROM mneme.search($1, 'ledger cabinet', 5)`,
			`SELECT count(*) FROM mneme.retrieve($1, 'ledger cabinet', 5)`,
			`SELECT length(mneme.context($1, 'ledger cabinet', 200))`,
		} {
			var n *int64
			args := []any{e.conv}
			if q == `SELECT count(*) FROM mneme.cleanup()` {
				args = nil
			}
			require.NoError(t, e.db.Pool.QueryRow(ctx, q, args...).Scan(&n), "%s: %s", what, q)
		}
		if !pipeline {
			return
		}
		for i := 0; i < 5; i++ {
			say(fmt.Sprintf("The ledger is in the cabinet, drawer %d, next to the blue folder.", i))
		}
		_, err := e.db.Pool.Exec(ctx, `SELECT mneme.segment_now($1)`, e.conv)
		if err != nil {
			require.Contains(t, []string{"22023", "P0002"}, sqlState(t, err), "%s: segment_now: %v", what, err)
		}
		e.drain()
		var failed []string
		rows, err := e.db.Pool.Query(ctx, `SELECT kind || ': ' || coalesce(last_error, '') FROM mneme.jobs WHERE state = 'failed'`)
		require.NoError(t, err)
		for rows.Next() {
			var s string
			require.NoError(t, rows.Scan(&s))
			failed = append(failed, s)
		}
		require.NoError(t, rows.Err())
		require.Empty(t, failed, "%s: a job failed", what)
	}
	say("Hello, where did I put the ledger?")
	consumers("defaults", true)

	pipelineReads := func(k string) bool {
		for _, p := range []string{"segment_", "review_", "extract_", "revision_", "initial_stability", "label_", "message_",
			"pending_reviews", "confidence", "inactive", "purge", "jobs_"} {
			if len(k) >= len(p) && k[:len(p)] == p {
				return true
			}
		}
		return false
	}
	for _, k := range keys {
		var candidates []string
		var cur any
		require.NoError(t, json.Unmarshal([]byte(defaults[k]), &cur))
		switch v := cur.(type) {
		case float64, nil:
			candidates = numbers
			if v == nil {
				candidates = append(candidates, "null")
			}
		case bool:
			candidates = []string{"true", "false"}
		case string:
			if _, err := e.db.Pool.Exec(ctx, `SELECT $1::interval`, v); err != nil {
				continue // an enumeration: its values are its rule
			}
			candidates = append(intervals, "null")
		case map[string]any:
			for _, x := range []string{"0", "1e-9", "0.001", "0.011", "1", "100", "36500", "1e308"} {
				obj := map[string]json.RawMessage{}
				for m := range v {
					obj[m] = json.RawMessage(x)
				}
				b, _ := json.Marshal(obj)
				candidates = append(candidates, string(b))
			}
		}
		for _, c := range candidates {
			_, err := e.db.Pool.Exec(ctx, `SELECT mneme.set_setting($1, $2::jsonb)`, k, c)
			if err != nil {
				require.Equal(t, "22023", sqlState(t, err), "%s = %s: %v", k, c, err)
				continue
			}
			consumers(k+" = "+c, all || pipelineReads(k))
		}
		_, err := e.db.Pool.Exec(ctx, `SELECT mneme.set_setting($1, $2::jsonb)`, k, defaults[k])
		require.NoError(t, err, "%s back to %s", k, defaults[k])
	}
}
