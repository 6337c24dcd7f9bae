package tests

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/pipeline"
)

// documented are the SQLSTATEs the API raises on bad input (docs/sql-api.md).
var documented = map[string]bool{
	"22004": true, // a required argument is NULL
	"22023": true, // an invalid value
	"22001": true, // too long
	"22008": true, // a bad time
	"22P02": true, // a value that is not of the argument's type (the cast of a literal)
	"P0002": true, // no such memory or job
	"42501": true, // another tenant's, or not this role's
	"55000": true, // not in a state for that
	"23505": true, // retry of a job whose equivalent is pending
	"22021": true, // text that is not UTF-8 (PostgreSQL refuses it before any function runs)
}

// hostile values per argument type, as SQL literals.
var hostile = map[string][]string{
	"uuid":                     {"NULL", "'00000000-0000-0000-0000-000000000000'", "gen_random_uuid()"},
	"text":                     {"NULL", "''", "E'\\u200b\\ufeff'", "E'\\x01\\x02'", "repeat('z', 200000)", "'Robert''); DROP TABLE mneme.memories;--'", "'%s%n%x'", "'😀'"},
	"integer":                  {"NULL", "0", "-1", "2147483647"},
	"bigint":                   {"NULL", "0", "-1", "9223372036854775807"},
	"double precision":         {"NULL", "'NaN'", "'Infinity'", "'-Infinity'", "0", "-1", "1e308"},
	"real":                     {"NULL", "'NaN'", "'Infinity'", "-1", "2"},
	"boolean":                  {"NULL"},
	"timestamp with time zone": {"NULL", "'infinity'", "'-infinity'", "'294000-01-01'", "'0001-01-01 BC'"},
	"interval":                 {"NULL", "'-1 day'", "'100000 years'"},
	"jsonb":                    {"NULL", "'null'", "'[]'", "'\"x\"'", "'{\"check\": \"yes\"}'"},
	"real[]":                   {"NULL", "'{}'", "ARRAY['NaN']::real[]", "ARRAY[1,2,3]::real[]", "array_fill(0::real, ARRAY[256])"},
	"uuid[]":                   {"NULL", "'{}'", "ARRAY[NULL]::uuid[]", "ARRAY[gen_random_uuid()]"},
	"bigint[]":                 {"NULL", "'{}'", "ARRAY[NULL]::bigint[]", "ARRAY[-1]::bigint[]"},
	"text[]":                   {"NULL", "'{}'", "ARRAY[NULL]::text[]", "ARRAY['']", "ARRAY[repeat('n', 1000)]"},
}

// TestHostileInputToEveryFunction calls every function of the API that an
// application, the sidecar or an operator may call, once per hostile value
// of each argument (the others valid): each call succeeds or raises a
// documented SQLSTATE, and none leaves a state that a normal conversation
// then fails on.
func TestHostileInputToEveryFunction(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	conv := uuid.New()
	var mem uuid.UUID
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'the lighthouse keeper paints the stairs blue')`, conv).Scan(&mem))
	valid := map[string]string{
		"uuid": "'" + conv.String() + "'", "text": "'hello there friend'", "integer": "5", "bigint": "1",
		"double precision": "1", "real": "0.5", "boolean": "false", "timestamp with time zone": "now()",
		"interval": "'1 day'", "jsonb": "'{}'", "real[]": "mneme.hash_embed('lighthouse')", "uuid[]": "ARRAY['" + mem.String() + "']::uuid[]",
		"bigint[]": "'{}'", "text[]": "ARRAY['Ann']",
	}
	rows, err := db.Pool.Query(ctx, `
		SELECT p.proname, coalesce(array_agg(format_type(t.typ, NULL) ORDER BY t.n) FILTER (WHERE t.typ IS NOT NULL), '{}')
		FROM pg_proc p
		LEFT JOIN LATERAL unnest(p.proargtypes::oid[]) WITH ORDINALITY AS t(typ, n) ON true
		WHERE p.pronamespace = 'mneme'::regnamespace AND p.prokind = 'f' AND p.proname !~ '^_'
		  AND p.prorettype <> 'trigger'::regtype
		  AND p.proname NOT IN ('change_embedding_dim', 'bm25_reindex', 'erase_conversation', 'cleanup', 'reset_initial_state')
		GROUP BY p.oid, p.proname ORDER BY p.proname`)
	require.NoError(t, err)
	type fn struct {
		name string
		args []string
	}
	fns, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (fn, error) {
		var f fn
		err := r.Scan(&f.name, &f.args)
		return f, err
	})
	require.NoError(t, err)
	require.Greater(t, len(fns), 40)

	canary := uuid.New()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	calls := 0
	for _, f := range fns {
		for i, typ := range f.args {
			values, ok := hostile[typ]
			require.True(t, ok, "%s: no hostile values for type %s", f.name, typ)
			for _, h := range values {
				args := make([]string, len(f.args))
				for j, ty := range f.args {
					args[j] = valid[ty]
				}
				args[i] = h + "::" + typ
				q := fmt.Sprintf("SELECT * FROM mneme.%s(%s)", f.name, strings.Join(args, ", "))
				calls++
				err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
					_, err := tx.Exec(ctx, "SET LOCAL statement_timeout = '20s'")
					if err == nil {
						_, err = tx.Exec(ctx, q)
					}
					return err
				})
				if err != nil {
					var pgErr *pgconn.PgError
					require.True(t, errors.As(err, &pgErr), "%s: %v", q, err)
					require.True(t, documented[pgErr.Code], "%.200s: undocumented %s %s", q, pgErr.Code, pgErr.Message)
					require.Less(t, len(pgErr.Message), 500, "%.200s: the error quotes a prefix at most", q)
				}
				// No state a normal conversation then fails on.
				at = at.Add(time.Minute)
				_, err = db.Pool.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'a normal message about the lighthouse', $2)`, canary, at)
				require.NoError(t, err, "after %.200s", q)
				var n int
				require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.search($1, 'lighthouse stairs', 5)`, conv).Scan(&n), "after %.200s", q)
			}
		}
	}
	t.Logf("%d calls of %d functions", calls, len(fns))
}

// FuzzAddMessage: whatever role, content and time an application sends,
// add_message succeeds or raises a documented SQLSTATE, and what it accepted
// segments (offline pipeline) without a failed job, after which the
// conversation goes on. Run longer with: go test ./tests -run '^$' -fuzz FuzzAddMessage
func FuzzAddMessage(f *testing.F) {
	for _, s := range []struct {
		role, content string
		minutes       int64
	}{
		{"user", "hello there", 1}, {"user", "\u200b", 1}, {"assistant", "\ufeff\x01", 1}, {"robot", "hi", 1},
		{"user", strings.Repeat("long ", 30000), 1}, {"user", "past", -10000}, {"user", "future", 1 << 40},
		{"", "empty role", 1}, {"user", "😀 emoji and \u202e bidi", 1}, {"user", "tab\tand\nnewline", 0},
	} {
		f.Add(s.role, s.content, s.minutes)
	}
	db := dbtest.New(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, role, content string, minutes int64) {
		conv := uuid.New()
		base := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
		for i := 0; i < 5; i++ {
			_, err := db.Pool.Exec(ctx, `SELECT mneme.add_message($1, 'user', $2, $3)`, conv, fmt.Sprintf("warm-up message %d", i), base.Add(time.Duration(i)*time.Minute))
			require.NoError(t, err)
		}
		at := base.Add(5 * time.Minute)
		if minutes > -1<<20 && minutes < 1<<20 {
			at = at.Add(time.Duration(minutes) * time.Minute)
		} else {
			at = at.AddDate(1000, 0, 0)
		}
		_, err := db.Pool.Exec(ctx, `SELECT mneme.add_message($1, $2, $3, $4)`, conv, role, content, at)
		if err != nil {
			var pgErr *pgconn.PgError
			require.True(t, errors.As(err, &pgErr), "%v", err)
			require.True(t, documented[pgErr.Code], "undocumented %s: %s", pgErr.Code, pgErr.Message)
		}
		_, err = db.Pool.Exec(ctx, `SELECT mneme.segment_now($1)`, conv)
		require.NoError(t, err)
		e := &pipelineEnv{t: t, db: db, conv: conv, log: slog.New(slog.DiscardHandler)}
		e.deps = pipeline.Deps{Embedder: embed.NewHash(config.DefaultEmbedDim), Log: e.log}
		e.p, err = pipeline.New(e.deps)
		require.NoError(t, err)
		e.drain()
		require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE conversation_id = $1 AND state = 'failed'`, conv), "nothing accepted fails a job")
		_, err = db.Pool.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'and the conversation goes on')`, conv)
		require.NoError(t, err)
	})
}
