package tests

import (
	"context"
	"os"
	"regexp"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// No setting the rules accept, and no stored row, breaks search, the
// context or the cleanup: the values that made the arithmetic overflow
// (a stability of 1e-307 days, weights of 1e-307) are refused, and rows
// stored with extreme values (written directly, as an old release or a
// bug could) rank and clean up without 22003, before and after the
// settings are put back.
func TestExtremeValuesCannotBreakSearch(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			ctx := context.Background()
			db := dbtest.New(t, dbtest.WithVector(variant))
			for _, c := range [][2]string{
				{"initial_stability_days", `{"general": 1e-307}`},
				{"initial_stability_days", `{"general": 0.001}`},
				{"label_weights", `{"general": 1e-307}`},
				{"confidence_by_source", `{"explicit": 1e-307, "import": 0.8, "extracted": 0.7, "conversation": 0.6}`},
			} {
				_, err := db.Pool.Exec(ctx, `SELECT mneme.set_setting($1, $2)`, c[0], c[1])
				require.Equal(t, "22023", sqlState(t, err), "%s = %s", c[0], c[1])
			}
			// The ends of every range that remain: the arithmetic stays finite.
			for _, c := range [][2]string{
				{"initial_stability_days", `{"general": 0.011, "trivial": 0.011}`},
				{"label_weights", `{"general": 0.0011}`},
				{"retrievability_weight", `10`},
				{"confidence_weight", `10`},
				{"rrf_k", `10000`},
			} {
				_, err := db.Pool.Exec(ctx, `SELECT mneme.set_setting($1, $2)`, c[0], c[1])
				require.NoError(t, err, "%s = %s", c[0], c[1])
			}
			conv := uuid.New()
			var ids []uuid.UUID
			for i, text := range []string{"The lighthouse keeper lives on the island.", "The island ferry leaves at noon.",
				"The keeper's boat is blue.", "Thanks for the island tip!"} {
				var id uuid.UUID
				require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, $2, at => now() - make_interval(days => $3))`,
					conv, text, 1000*(i+1)).Scan(&id))
				ids = append(ids, id)
			}
			// Stored rows at the extremes of their types.
			_, err := db.Pool.Exec(ctx, `UPDATE mneme.memories SET stability = 1e-308, last_reviewed_at = '0001-01-01', confidence_score = 1e-38
				WHERE id = $1`, ids[1])
			require.NoError(t, err)
			_, err = db.Pool.Exec(ctx, `UPDATE mneme.memories SET stability = 'Infinity', confidence_score = 0 WHERE id = $1`, ids[2])
			require.NoError(t, err)
			_, err = db.Pool.Exec(ctx, `UPDATE mneme.memories SET stability = 'NaN', last_reviewed_at = '9999-12-31' WHERE id = $1`, ids[3])
			require.NoError(t, err)

			reads := []string{
				`SELECT memory_id FROM mneme.search($1, 'island keeper', 10)`,
				`SELECT memory_id FROM mneme.retrieve($1, 'island keeper', 10)`,
				`SELECT mneme.context($1, 'island keeper', 500)`,
				`SELECT item FROM mneme.context_items($1, 'island keeper', 500)`,
				`SELECT mneme.retrievability(1e-308, '0001-01-01', now()) WHERE $1::uuid IS NOT NULL`,
			}
			all := append([]string{`SELECT action FROM mneme.cleanup(dry_run => true) WHERE $1::uuid IS NOT NULL`}, reads...)
			check := func(pool interface {
				Query(context.Context, string, ...any) (pgx.Rows, error)
			}, queries []string) {
				t.Helper()
				for _, q := range queries {
					rows, err := pool.Query(ctx, q, conv)
					require.NoError(t, err, q)
					n := 0
					for rows.Next() {
						n++
					}
					require.NoError(t, rows.Err(), q)
					require.Positive(t, n, q)
				}
			}
			check(db.Pool, all)
			// A weight an older release accepted, written as it was stored.
			_, err = db.Pool.Exec(ctx, `UPDATE mneme.settings SET value = '{"general": 1e-307}' WHERE key = 'label_weights'`)
			require.NoError(t, err)
			check(db.Pool, all)
			app, _ := db.PoolAs(t, "mneme_app")
			check(app, reads)
			admin, _ := db.PoolAs(t, "mneme_admin")
			check(admin, all)
			var r float64
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.retrievability(1e-308, '0001-01-01', now())`).Scan(&r))
			require.Greater(t, r, 0.0)
			require.Less(t, r, 1e-5)

			// The cleanup acts on them too (and the settings put back
			// change nothing: the values are stored with the memories).
			_, err = db.Pool.Exec(ctx, `UPDATE mneme.settings SET value = default_value WHERE default_value IS NOT NULL AND value IS DISTINCT FROM default_value`)
			require.NoError(t, err)
			check(db.Pool, all)
			_, err = admin.Exec(ctx, `SELECT * FROM mneme.cleanup()`)
			require.NoError(t, err)
			require.Equal(t, "inactive", rowText(t, db, `SELECT status FROM mneme.memories WHERE id = $1`, ids[1]))
		})
	}
}

// Every registered setting is documented in docs/settings.md (a row of
// its table, the key in backquotes), and the page documents no key that
// does not exist.
func TestEverySettingIsDocumented(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	page, err := os.ReadFile("../docs/settings.md")
	require.NoError(t, err)
	rows, err := db.Pool.Query(ctx, `SELECT key FROM mneme.settings ORDER BY key`)
	require.NoError(t, err)
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.NotEmpty(t, keys)
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z0-9_]+)` \\|").FindAllStringSubmatch(string(page), -1) {
		documented[m[1]] = true
	}
	for _, k := range keys {
		require.True(t, documented[k], "setting %s is not in the table of docs/settings.md", k)
		delete(documented, k)
	}
	require.Empty(t, documented, "docs/settings.md documents keys that are not registered")
}

func rowText(t *testing.T, db *dbtest.DB, q string, args ...any) string {
	t.Helper()
	var s string
	require.NoError(t, db.Pool.QueryRow(context.Background(), q, args...).Scan(&s))
	return s
}
