package ui

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestProbeExplain(t *testing.T) {
	if os.Getenv("PROBE") == "" {
		t.Skip()
	}
	ctx := context.Background()
	db, conv, _ := benchTenant(t)
	admin, _ := db.PoolAs(t, "mneme_admin")
	var all []string
	rows, err := db.Pool.Query(ctx, `SELECT DISTINCT conversation_id::text FROM mneme.memories`)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		all = append(all, s)
	}
	qs := []struct {
		name, sql string
		pool      bool
		args      []any
	}{
		{"search conv", `SELECT count(*) FROM mneme.search($1, 'the borrow checker', 50, NULL, scope => 'conversation')`, true, []any{conv}},
		{"ctx conv", `SELECT count(*) FROM mneme.context_items($1, 'the borrow checker', 1000, NULL, scope => 'conversation')`, true, []any{conv}},
		{"search tenant", `SELECT count(*) FROM mneme.search($1, 'the user likes cooking', 50, NULL, scope => 'tenant')`, true, []any{conv}},
		{"ctx tenant", `SELECT count(*) FROM mneme.context_items($1, 'the user likes cooking', 1000, NULL, scope => 'tenant')`, true, []any{conv}},
		{"vec scope 20", `SELECT count(*) FROM mneme._vector_search_scope($1::uuid[], mneme.hash_embed('the user likes cooking'), 100, NULL, NULL)`, false, []any{all}},
		{"vec 1", `SELECT count(*) FROM mneme._vector_search($1::uuid, mneme.hash_embed('the user likes cooking'), 100, NULL, NULL)`, false, []any{all[0]}},
		{"bm25 20", `SELECT count(*) FROM mneme._bm25_search($1::uuid[], 'the user likes cooking', 100, NULL, NULL)`, false, []any{all}},
		{"hash", `SELECT mneme.hash_embed('the user likes cooking')`, false, nil},
		{"conversations", `SELECT count(*) FROM mneme.conversations(500)`, true, nil},
		{"titles", `SELECT count(*) FROM mneme.conversation_titles($1::uuid[])`, true, []any{all}},
		{"setting", `SELECT mneme.setting('context_candidates')`, true, nil},
	}
	for _, q := range qs {
		p := db.Pool
		if q.pool {
			p = admin
		}
		var ds []time.Duration
		for range 7 {
			t0 := time.Now()
			_, err := p.Exec(ctx, q.sql, q.args...)
			require.NoError(t, err, q.name)
			ds = append(ds, time.Since(t0))
		}
		fmt.Println("TIME", q.name, ds)
	}
}
