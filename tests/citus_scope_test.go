package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// TestCitusDelegatedTenantScope: a call with scope tenant made alone
// (`SELECT mneme.context(conv, ...)`, which Citus delegates to the worker
// that holds conv) sees the memories of every conversation of the tenant,
// on every worker, as the same call on the coordinator does, and records
// them in its pending review. On one server both forms are the same call.
func TestCitusDelegatedTenantScope(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	// Eight conversations (on a two-worker cluster some are on the other
	// worker than the first), each with a fact of its own word.
	convs := make([]uuid.UUID, 8)
	words := make([]string, len(convs))
	owner := map[uuid.UUID]uuid.UUID{}
	for i := range convs {
		convs[i] = uuid.New()
		words[i] = fmt.Sprintf("zqword%c", 'g'+i)
		var id uuid.UUID
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, $2)`, convs[i],
			fmt.Sprintf("The secret word is %s.", words[i])).Scan(&id))
		owner[id] = convs[i]
	}
	query := "secret word " + strings.Join(words, " ")
	pending := func() []uuid.UUID {
		t.Helper()
		var ids []uuid.UUID
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT coalesce(array_agg(x::uuid), '{}') FROM mneme.message_queue q,
			jsonb_array_elements_text(q.pending_reviews -> -1 -> 'memory_ids') x WHERE q.id = $1`, convs[0]).Scan(&ids))
		return ids
	}
	spans := func(ids []uuid.UUID) int {
		seen := map[uuid.UUID]bool{}
		for _, id := range ids {
			seen[owner[id]] = true
		}
		return len(seen)
	}
	// The delegated form and the coordinator's.
	for _, q := range []string{
		`SELECT mneme.context($1, $2, 2000, scope => 'tenant')`,
		`SELECT c FROM mneme.context($1, $2, 2000, scope => 'tenant') c`,
	} {
		var md string
		require.NoError(t, db.Pool.QueryRow(ctx, q, convs[0], query).Scan(&md))
		for _, w := range words {
			require.Contains(t, md, w, q)
		}
		require.Equal(t, len(convs), spans(pending()), "%s: the pending review names a memory of every conversation", q)
	}
	for _, q := range []string{
		`SELECT (mneme.retrieve($1, $2, 20, scope => 'tenant')).memory_id`,
		`SELECT r.memory_id FROM mneme.retrieve($1, $2, 20, scope => 'tenant') r`,
	} {
		rows, err := db.Pool.Query(ctx, q, convs[0], query)
		require.NoError(t, err)
		var got []uuid.UUID
		for rows.Next() {
			var id uuid.UUID
			require.NoError(t, rows.Scan(&id))
			got = append(got, id)
		}
		require.NoError(t, rows.Err())
		require.Equal(t, len(convs), spans(got), "%s returns a memory of every conversation", q)
		require.Equal(t, len(convs), spans(pending()), "%s: the pending review names a memory of every conversation", q)
	}
}
