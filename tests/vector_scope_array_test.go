package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// The array variant's vector leg over several conversations (scope
// tenant) is one statement over all of them: it returns what merging each
// conversation's own leg returns (the same memories, distances and ranks,
// ties by id, with and without a date range, a forgotten memory left out),
// and mneme.search with scope tenant ranks by it.
func TestVectorScopeArrayIsTheMergedLegs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t, dbtest.WithVector("array"))
	var convs []uuid.UUID
	topics := []string{"bees on the roof", "green tea in the morning", "the borrow checker", "cooking on Sunday", "the museum trip"}
	for i := range 6 {
		c := uuid.New()
		convs = append(convs, c)
		for j := range 40 {
			_, err := db.Pool.Exec(ctx, `SELECT mneme.remember($1, $2, at => now() - make_interval(days => $3))`, c,
				fmt.Sprintf("Fact %d of %d: the user talked about %s and %s.", j, i, topics[(i+j)%5], topics[(i*j)%5]), j)
			require.NoError(t, err)
		}
		// Two equal texts in two conversations: a tie broken by id.
		_, err := db.Pool.Exec(ctx, `SELECT mneme.remember($1, 'The user keeps bees.')`, c)
		require.NoError(t, err)
	}
	_, err := db.Pool.Exec(ctx, `SELECT mneme.forget(id, 'a test') FROM mneme.memories WHERE content LIKE 'Fact 3 of %'`)
	require.NoError(t, err)

	dump := func(q string, args ...any) string {
		t.Helper()
		rows, err := db.Pool.Query(ctx, q, args...)
		require.NoError(t, err, q)
		defer rows.Close()
		var out []string
		for rows.Next() {
			var id uuid.UUID
			var d float64
			var r int
			require.NoError(t, rows.Scan(&id, &d, &r))
			out = append(out, fmt.Sprintf("%s %.17g %d", id, d, r))
		}
		require.NoError(t, rows.Err())
		return strings.Join(out, "\n")
	}
	merged := `SELECT x.memory_id, x.distance, (rank() OVER (ORDER BY x.distance))::int
		FROM (SELECT y.* FROM unnest($1::uuid[]) AS c(id), LATERAL mneme._vector_search(c.id, mneme.hash_embed($2), $3, $4, $5) AS y
		      ORDER BY y.distance, y.memory_id LIMIT $3) x ORDER BY x.distance, x.memory_id`
	scope := `SELECT memory_id, distance, rank FROM mneme._vector_search_scope($1::uuid[], mneme.hash_embed($2), $3, $4, $5)`
	for _, q := range []string{"bees", "the user keeps bees", "green tea and the museum", "Sunday cooking borrow checker"} {
		for _, k := range []int{1, 7, 100} {
			for _, since := range []any{nil, "now() - interval '10 days'"} {
				var s any
				if since != nil {
					require.NoError(t, db.Pool.QueryRow(ctx, `SELECT `+since.(string)).Scan(&s))
				}
				want := dump(merged, convs, q, k, s, nil)
				require.NotEmpty(t, want)
				require.Equal(t, want, dump(scope, convs, q, k, s, nil), "query %q, k %d, since %v", q, k, since)
			}
		}
	}
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.search($1, 'bees', 10, scope => 'tenant')
		WHERE vector_rank IS NOT NULL`, convs[0]).Scan(&n))
	require.Equal(t, 10, n)

	// One statement: the scope's leg calls no conversation's leg.
	require.NoError(t, pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL track_functions = 'all'`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, scope, convs, "bees", 10, nil, nil); err != nil {
			return err
		}
		var calls int
		if err := tx.QueryRow(ctx, `SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions
			WHERE schemaname = 'mneme' AND funcname = '_vector_search'`).Scan(&calls); err != nil {
			return err
		}
		require.Zero(t, calls, "the scope's leg ran a statement per conversation")
		return nil
	}))
}
