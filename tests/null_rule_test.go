package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// nullRuleValue is a valid value for an argument of the public API, by its
// name and type ("" when the test has none: the function is skipped).
func nullRuleValue(name, typ string) string {
	switch name {
	case "role":
		return "'user'"
	case "scope":
		return "'conversation'"
	case "label":
		return "'general'"
	case "key":
		return "'rrf_k'"
	case "value":
		return "'60'::jsonb"
	case "tenant":
		return "'default'"
	case "valid_until":
		return "now() + interval '1 day'"
	case "k", "limit":
		return "5"
	case "budget":
		return "100"
	case "dim":
		return "256"
	case "surprise":
		return "0.5"
	case "speakers", "contents":
		return "ARRAY['Caroline']"
	}
	switch typ {
	case "uuid":
		return "'7f1c2f9e-0000-4000-8000-0000000000aa'::uuid"
	case "text":
		return "'The lighthouse keeper lives on the island.'"
	case "integer", "bigint":
		return "1"
	case "timestamp with time zone":
		return "now()"
	case "boolean":
		return "false"
	case "double precision", "real":
		return "0.5"
	case "interval":
		return "interval '1 hour'"
	case "uuid[]":
		return "ARRAY['7f1c2f9e-0000-4000-8000-0000000000aa']::uuid[]"
	case "text[]":
		return "ARRAY['island']"
	case "real[]":
		return "mneme.hash_embed('island keeper')"
	}
	return ""
}

// One rule for NULL arguments of the public API (every function mneme_app
// or mneme_admin may call): a NULL where a value is needed is 22004, never
// 22023, which is for a value that is there but wrong (docs/sql-api.md).
// Each argument in turn is NULL, the others valid; a function whose valid
// call already fails with 22023 is reported as skipped.
func TestNullArgumentsAre22004(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	rows, err := db.Pool.Query(ctx, `
		SELECT p.proname, coalesce(p.proargnames, '{}'), ARRAY(SELECT format_type(x, NULL) FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY u(x, o) ORDER BY o)
		FROM pg_proc p
		WHERE p.pronamespace = 'mneme'::regnamespace AND p.prokind = 'f' AND p.pronargs > 0
		  AND (has_function_privilege('mneme_app', p.oid, 'EXECUTE') OR has_function_privilege('mneme_admin', p.oid, 'EXECUTE'))
		  AND p.proname NOT IN ('_tenant', '_resolve_tenant', '_is_worker', 'change_embedding_dim')
		ORDER BY 1, 2`)
	require.NoError(t, err)
	type fn struct {
		name  string
		args  []string
		types []string
	}
	fns, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (fn, error) {
		var f fn
		return f, r.Scan(&f.name, &f.args, &f.types)
	})
	require.NoError(t, err)
	require.NotEmpty(t, fns)
	call := func(sql string) string {
		tx, err := db.Pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, sql); err != nil {
			return sqlState(t, err)
		}
		return "ok"
	}
	checked := 0
	for _, f := range fns {
		vals := make([]string, len(f.types))
		ok := true
		for i, typ := range f.types {
			name := ""
			if i < len(f.args) {
				name = f.args[i]
			}
			if vals[i] = nullRuleValue(name, typ); vals[i] == "" {
				ok = false
			}
		}
		if !ok {
			t.Logf("skipped %s%v: no value for an argument type", f.name, f.types)
			continue
		}
		sql := func(v []string) string {
			return fmt.Sprintf("SELECT mneme.%s(%s)", pgx.Identifier{f.name}.Sanitize(), strings.Join(v, ", "))
		}
		if base := call(sql(vals)); base == "22023" {
			t.Logf("skipped %s: the valid call gives 22023", sql(vals))
			continue
		}
		for i, typ := range f.types {
			v := append([]string(nil), vals...)
			v[i] = "NULL::" + typ
			require.NotEqual(t, "22023", call(sql(v)), "%s: a NULL argument is 22004 (or means its default), not 22023", sql(v))
			checked++
		}
	}
	require.Greater(t, checked, 50, "the rule is checked on the API's arguments")
}
