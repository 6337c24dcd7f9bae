package tests

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/migrate"
)

// TestSettingRules: every key of mneme.settings has a rule (its default is
// accepted back), and values of the wrong type or out of range are
// rejected with 22023 naming the key, changing nothing; search still works.
func TestSettingRules(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	conv := uuid.New()
	_, err := db.Pool.Exec(ctx, `SELECT mneme.remember($1, 'The lighthouse keeper paints the stairs blue')`, conv)
	require.NoError(t, err)
	snapshot := func() string {
		var s string
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT string_agg(key || '=' || value::text, ',' ORDER BY key) FROM mneme.settings`).Scan(&s))
		return s
	}
	rows, err := db.Pool.Query(ctx, `SELECT key, value::text FROM mneme.settings ORDER BY key`)
	require.NoError(t, err)
	defaults := map[string]string{}
	for rows.Next() {
		var k, v string
		require.NoError(t, rows.Scan(&k, &v))
		defaults[k] = v
	}
	require.NoError(t, rows.Err())
	for k, v := range defaults {
		_, err := db.Pool.Exec(ctx, `SELECT mneme.set_setting($1, $2::jsonb)`, k, v)
		if k == "vector_variant" || k == "embedding_dim" {
			require.Equal(t, "55000", sqlState(t, err), k)
			continue
		}
		require.NoError(t, err, "%s: its default passes its rule", k)
	}

	hostile := []string{`null`, `"x"`, `true`, `[]`, `{}`, `-1`, `1e300`, `"NaN"`, `"Infinity"`, `0.5e-400`}
	bad := map[string][]string{
		"bm25_b": {`1.5`}, "bm25_k1": {`11`}, "bm25_skip_min_postings": {`-1`, `2.5`}, "inactive_below_r": {`1`}, "retrievability_weight": {`11`},
		"rrf_hash_vector_weight": {`11`}, "rrf_k": {`0`}, "segment_gap_seconds": {`0`}, "segment_shift_similarity": {`2`},
		"message_max_chars": {`0`, `1.5`}, "pending_reviews_max": {`1`}, "retrieve_candidates": {`0`, `1001`},
		"segment_episode_max": {`0`}, "segment_episode_min": {`2.5`}, "segment_max_messages": {`0`}, "segment_min_messages": {`0`},
		"segment_min_chars": {`-2`}, "segment_summary_sentences": {`0`}, "segment_window": {`0`}, "vector_exact_max": {`-5`},
		"vector_ef_search": {`0`, `1001`, `2.5`}, "vector_scope_index_min": {`0`, `1.5`},
		"vector_candidates_per_k": {`0`, `1001`, `2.5`},
		"context_candidates":      {`0`, `101`}, "context_window": {`-1`, `1.5`},
		"revision_candidates": {`0`, `100`, `2.5`}, "revision_reconfirm_boost": {`-0.1`, `1.5`}, "revision_slot_candidates": {`-1`, `1001`, `2.5`}, "revision_duplicate_similarity": {`0.4`, `1.1`},
		"revision_scope": {`"everything"`}, "context_order": {`"oldest"`}, "confidence_weight": {`11`}, "extract_facts": {`"yes"`, `1`},
		"extract_facts_max":    {`0`, `1001`, `2.5`},
		"confidence_by_source": {`{"explicit": 2}`, `{"explicit": 0.9}`, `{"explicit": 0.9, "import": 0.8, "extracted": 0.7, "conversation": 0.6, "rumour": 0.1}`},
		"purge_after_days":     {`0`}, "cleanup_interval": {`"soon"`, `"1 second"`}, "consolidate_quiet": {`"soon"`, `"-1 minute"`}, "consolidate_max_delay": {`null`, `"400 days"`},
		"consolidate_llm_max_calls": {`-1`, `101`, `2.5`}, "jobs_retention": {`"-1 day"`},
		"message_max_future": {`"-1 hour"`, `"1000 years"`}, "embedder": {`"openai"`, `42`},
		"review_default_rating": {`"great"`}, "llm_prices": {`[]`, `{"m": 1}`, `{"m": {"in": -1, "out": 1}}`, `{"m": {"in": 1}}`, `{"m": {"in": 1, "out": 1, "cached": 1}}`, `{"": {"in": 1, "out": 1}}`},
		"label_weights":               {`{"general": -5}`, `{"general": 0}`, `{"nonsense": 1}`, `{"general": "1"}`},
		"initial_stability_days":      {`{"general": 0}`, `{"trivial": 3}`, `{"general": 1e9}`},
		"review_heuristic_thresholds": {`{"easy": 0.1, "good": 0.5, "hard": 0.01}`, `{"easy": 0.25, "good": 0.09}`, `{"easy": 2, "good": 0.09, "hard": 0.04}`},
	}
	before := snapshot()
	for k := range defaults {
		if k == "vector_variant" || k == "embedding_dim" {
			continue
		}
		require.Contains(t, bad, k, "every key has out-of-range cases here")
		values := append(append([]string{}, bad[k]...), hostile...)
		for _, v := range values {
			if k == "purge_after_days" || k == "cleanup_interval" || k == "jobs_retention" || k == "consolidate_quiet" {
				if v == `null` {
					continue // these may be null: off
				}
			}
			if v == `{}` && (k == "label_weights" || k == "llm_prices") || v == `-1` && k == "segment_shift_similarity" || v == `true` && k == "extract_facts" {
				continue // valid: no weights (every label weighs 1); similarity -1; extract facts
			}
			_, err := db.Pool.Exec(ctx, `SELECT mneme.set_setting($1, $2::jsonb)`, k, v)
			require.Error(t, err, "%s = %s", k, v)
			require.Equal(t, "22023", sqlState(t, err), "%s = %s: %v", k, v, err)
			require.ErrorContains(t, err, k)
		}
	}
	require.Equal(t, before, snapshot(), "no rejected value was written")
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.search($1, 'lighthouse stairs', 5)`, conv).Scan(&n))
	require.Equal(t, 1, n)
}

// TestSettingDefaultsRegistry: every setting has its default recorded (but
// the two facts of the installation), and a migrate that brings a changed
// default replaces the value only where it is still the previous default:
// a value the user set stays, a new key arrives with its default.
func TestSettingDefaultsRegistry(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	var missing []string
	rows, err := db.Pool.Query(ctx, `SELECT key FROM mneme.settings
		WHERE default_value IS NULL AND key NOT IN ('vector_variant', 'embedding_dim') ORDER BY key`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		missing = append(missing, k)
	}
	require.NoError(t, rows.Err())
	require.Empty(t, missing, "every setting has its default in the registry")
	var differ int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.settings
		WHERE value IS DISTINCT FROM default_value AND default_value IS NOT NULL`).Scan(&differ))
	require.Zero(t, differ, "a fresh database holds the defaults")

	// As if the previous release's defaults were bm25_b 0.8 (untouched) and
	// bm25_k1 1.0 (set to 1.5 by the user), and rrf_k did not exist yet.
	_, err = db.Pool.Exec(ctx, `UPDATE mneme.settings SET value = '0.8', default_value = '0.8' WHERE key = 'bm25_b'`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `SELECT mneme.set_setting('bm25_k1', '1.5')`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `UPDATE mneme.settings SET default_value = '1.0' WHERE key = 'bm25_k1'`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `DELETE FROM mneme.settings WHERE key = 'rrf_k'`)
	require.NoError(t, err)
	_, err = migrate.Run(ctx, db.URL, migrate.Options{Vector: db.Variant})
	require.NoError(t, err)
	get := func(k string) (string, string) {
		var v, d string
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT value::text, default_value::text FROM mneme.settings WHERE key = $1`, k).Scan(&v, &d))
		return v, d
	}
	v, d := get("bm25_b")
	require.Equal(t, []string{"0.75", "0.75"}, []string{v, d}, "an untouched value follows the new default")
	v, d = get("bm25_k1")
	require.Equal(t, []string{"1.5", "1.2"}, []string{v, d}, "a value the user set stays")
	v, d = get("rrf_k")
	require.Equal(t, v, d, "a new key arrives with its default")
}

// TestSettingPairsRefused: a minimum above its maximum is refused (22023,
// naming both keys) whichever side is set, against the other's current
// value; the value stays; equal bounds are accepted.
func TestSettingPairsRefused(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	get := func(k string) string {
		var v string
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT value::text FROM mneme.settings WHERE key = $1`, k).Scan(&v))
		return v
	}
	set := func(k, v string) error {
		_, err := db.Pool.Exec(ctx, `SELECT mneme.set_setting($1, $2::jsonb)`, k, v)
		return err
	}
	for _, p := range [][2]string{{"segment_min_messages", "segment_max_messages"}, {"segment_episode_min", "segment_episode_max"}} {
		lo, hi := p[0], p[1]
		loV, hiV := get(lo), get(hi)
		// The minimum above the current maximum, and the maximum below the
		// current minimum.
		for _, c := range []struct{ key, value string }{{lo, "100"}, {hi, "1"}} {
			err := set(c.key, c.value)
			require.Error(t, err, "%s = %s with %s = %s, %s = %s", c.key, c.value, lo, loV, hi, hiV)
			var pgErr *pgconn.PgError
			require.True(t, errors.As(err, &pgErr))
			require.Equal(t, "22023", pgErr.Code)
			require.Contains(t, pgErr.Message, lo, "the error names both keys")
			require.Contains(t, pgErr.Message, hi, "the error names both keys")
			require.Equal(t, loV, get(lo))
			require.Equal(t, hiV, get(hi))
		}
		// Equal bounds are consistent; then each side may move away again.
		require.NoError(t, set(lo, hiV), "%s = %s (its maximum)", lo, hiV)
		require.Error(t, set(hi, fmt.Sprint(mustAtoi(t, hiV)-1)), "%s below %s again", hi, lo)
		require.NoError(t, set(lo, loV))
		require.NoError(t, set(hi, loV), "%s = %s (its minimum)", hi, loV)
		require.Error(t, set(lo, fmt.Sprint(mustAtoi(t, loV)+1)), "%s above %s again", lo, hi)
		require.NoError(t, set(hi, hiV))
	}
}
