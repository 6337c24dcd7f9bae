package tests

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
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
	"54000": true, // a per-episode limit (add_fact beyond extract_facts_max)
	"22021": true, // text that is not UTF-8 (PostgreSQL refuses it before any function runs)
	"25006": true, // a call that writes, on a read-only hot standby
}

// hostile values per argument type, as SQL literals.
var hostile = map[string][]string{
	"uuid":                     {"NULL", "'00000000-0000-0000-0000-000000000000'", "gen_random_uuid()"},
	"text":                     {"NULL", "''", "E'\\u200b\\ufeff'", "E'\\x01\\x02'", "repeat('z', 200000)", "'Robert''); DROP TABLE mneme.memories;--'", "'%s%n%x'", "'😀'", "'" + incompressible(12, 20000) + "'"},
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
		SELECT p.proname, coalesce(array_agg(format_type(t.typ, NULL) ORDER BY t.n) FILTER (WHERE t.typ IS NOT NULL), '{}'),
		       coalesce(p.proargnames[1:p.pronargs], '{}')
		FROM pg_proc p
		LEFT JOIN LATERAL unnest(p.proargtypes::oid[]) WITH ORDINALITY AS t(typ, n) ON true
		WHERE p.pronamespace = 'mneme'::regnamespace AND p.prokind = 'f' AND p.proname !~ '^_'
		  AND p.prorettype <> 'trigger'::regtype
		  AND p.proname NOT IN ('change_embedding_dim', 'bm25_reindex', 'erase_conversation', 'cleanup', 'reset_initial_state')
		GROUP BY p.oid, p.proname ORDER BY p.proname`)
	require.NoError(t, err)
	type fn struct {
		name  string
		args  []string
		names []string
	}
	fns, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (fn, error) {
		var f fn
		err := r.Scan(&f.name, &f.args, &f.names)
		return f, err
	})
	require.NoError(t, err)
	require.Greater(t, len(fns), 40)

	canary := uuid.New()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	calls := 0
	unnamed, undocumentedErrs := map[string]bool{}, map[string]bool{}
	for _, f := range fns {
		// Valid by name where the type's value is not (a role, a label, a
		// memory of the function's own), so that the one hostile argument
		// is what an error is about.
		var fmem uuid.UUID
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, $2)`, conv, "the lighthouse keeper's note for "+f.name).Scan(&fmem))
		byName := map[string]string{
			"role": "'user'", "label": "'general'", "scope": "'conversation'", "kind": "'noop'", "rating": "'good'",
			"action": "'ADD'", "reviewer": "'heuristic'", "classifier": "'heuristic'", "fsrs_state": "'review'",
			"key": "'rrf_k'", "value": "'60'", "tenant": "'default'", "valid_until": "(now() + interval '1 day')",
			"memory_id": "'" + fmem.String() + "'", "id": "'" + fmem.String() + "'", "supersedes": "'" + fmem.String() + "'",
			"target_id": "'" + fmem.String() + "'",
		}
		validArgs := func() []string {
			args := make([]string, len(f.args))
			for j, ty := range f.args {
				args[j] = valid[ty]
				if j < len(f.names) && byName[f.names[j]] != "" {
					args[j] = byName[f.names[j]] + "::" + ty
				}
			}
			return args
		}
		// Whether the function succeeds with every argument valid (rolled
		// back): only then is an error of a hostile call about that argument.
		baseline := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, fmt.Sprintf("SELECT * FROM mneme.%s(%s)", f.name, strings.Join(validArgs(), ", "))); err != nil {
				return err
			}
			return errRollback
		})
		for i, typ := range f.args {
			values, ok := hostile[typ]
			require.True(t, ok, "%s: no hostile values for type %s", f.name, typ)
			for _, h := range values {
				args := validArgs()
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
					if !documented[pgErr.Code] && !(i < len(f.names) && strings.Contains(knownUndocumented[f.name+"."+f.names[i]], pgErr.Code)) {
						undocumentedErrs[fmt.Sprintf("%.200s: %s %s", q, pgErr.Code, pgErr.Message)] = true
					}
					require.Less(t, len(pgErr.Message), 500, "%.200s: the error quotes a prefix at most", q)
					// Only this argument is hostile: a data error the function
					// raises names it (22P02 and 22021 are PostgreSQL's own,
					// raised on the literal before the function runs).
					if errors.Is(baseline, errRollback) && strings.HasPrefix(pgErr.Code, "22") && pgErr.Code != "22P02" && pgErr.Code != "22021" &&
						i < len(f.names) && !namesArgument(pgErr.Message, f.names[i]) && !unnamedArguments[f.name+"."+f.names[i]] {
						unnamed[fmt.Sprintf("%s.%s: %s %.120s", f.name, f.names[i], pgErr.Code, pgErr.Message)] = true
					}
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
	require.Empty(t, slices.Sorted(maps.Keys(undocumentedErrs)), "undocumented SQLSTATEs")
	require.Empty(t, slices.Sorted(maps.Keys(unnamed)), "data errors that do not name the argument they are about")
}

// errRollback ends a transaction that succeeded without committing it.
var errRollback = errors.New("rolled back")

// namesArgument reports whether an error message names the parameter,
// spelled as declared or with spaces for underscores ("query embedding").
func namesArgument(msg, param string) bool {
	msg = strings.ToLower(msg)
	return strings.Contains(msg, param) || strings.Contains(msg, strings.ReplaceAll(param, "_", " "))
}

// unnamedArguments are the data errors known not to name their argument,
// in SQL files outside this test's remit: each is listed to be fixed.
var unnamedArguments = map[string]bool{
	"cosine_distance.b":        true, // sql/101-hash-embed.sql: "vectors of different dimensions (256 and 3)"
	"hash_embed.input":         true, // sql/101-hash-embed.sql: "cannot embed empty or whitespace-only text"
	"remember.conversation_id": true, // sql/050-memories.sql: "memory ... belongs to another conversation" (supersedes and conversation_id disagree)
	"set_setting.value":        true, // sql/010-setting-rules.sql: names the setting's key, by design (setting "rrf_k" must be ...)
}

// knownUndocumented are the SQLSTATEs a function is known to raise for an
// argument that it should check itself (function.parameter: SQLSTATEs), in
// SQL files outside this test's remit: each is listed to be fixed.
var knownUndocumented = map[string]string{}

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

// fuzzPipeline is the offline pipeline over db, for a fuzz input's jobs.
func fuzzPipeline(t *testing.T, db *dbtest.DB) *pipelineEnv {
	t.Helper()
	e := &pipelineEnv{t: t, db: db, log: slog.New(slog.DiscardHandler)}
	e.deps = pipeline.Deps{Embedder: embed.NewHash(config.DefaultEmbedDim), Log: e.log}
	var err error
	e.p, err = pipeline.New(e.deps)
	require.NoError(t, err)
	return e
}

// requireDocumentedError: err is nil or a documented SQLSTATE; a data
// error the function raised (22xxx but PostgreSQL's own 22P02 and 22021)
// names one of params. It returns the error, nil when there was none.
func requireDocumentedError(t *testing.T, err error, params ...string) *pgconn.PgError {
	t.Helper()
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "%v", err)
	require.True(t, documented[pgErr.Code], "undocumented %s: %s", pgErr.Code, pgErr.Message)
	require.Less(t, len(pgErr.Message), 500, "the error quotes a prefix at most")
	if strings.HasPrefix(pgErr.Code, "22") && pgErr.Code != "22P02" && pgErr.Code != "22021" {
		require.True(t, slices.ContainsFunc(params, func(p string) bool { return namesArgument(pgErr.Message, p) }),
			"%s %q names none of %v", pgErr.Code, pgErr.Message, params)
	}
	return pgErr
}

// fuzzTime is base moved by minutes (kept within a few centuries), or
// "infinity" / "-infinity" for the extremes.
func fuzzTime(base time.Time, minutes int64) string {
	switch {
	case minutes == math.MaxInt64:
		return "infinity"
	case minutes == math.MinInt64:
		return "-infinity"
	}
	return base.Add(time.Duration(minutes%100_000_000) * time.Minute).Format(time.RFC3339Nano)
}

// FuzzSearch: whatever query, k, scope, date range, as_of and history flag
// an application sends, search succeeds or raises a documented SQLSTATE
// whose message names the argument, and the conversation's memories are
// still found after. Run longer with: go test ./tests -run '^$' -fuzz FuzzSearch
func FuzzSearch(f *testing.F) {
	for _, s := range []struct {
		query              string
		k                  int32
		scope              string
		since, until, asOf int64
		flags              uint8
	}{
		{"lighthouse stairs", 5, "conversation", 0, 0, 0, 0}, {"lighthouse", 100, "tenant", -600, 600, 0, 1 | 2},
		{"keeper", 0, "conversation", 0, 0, 0, 0}, {"keeper", 101, "conversation", 0, 0, 0, 0}, {"\u200b", 5, "conversation", 0, 0, 0, 0},
		{"stairs", 5, "tenants", 0, 0, 0, 0}, {"stairs", 5, "", 0, 0, 0, 0}, {"paint", 5, "conversation", 60, -60, 0, 1 | 2},
		{"blue", 5, "tenant", 0, 0, 0, 4 | 8}, {"blue", 5, "conversation", 0, 0, math.MaxInt64, 8}, {"red", 5, "conversation", 0, 0, -1 << 40, 8 | 16},
		{strings.Repeat("lighthouse ", 1000), 5, "conversation", 0, 0, 0, 16}, {"x\x00y", 5, "conversation", 0, 0, 0, 0},
		{"'); DROP TABLE mneme.memories;--", 5, "conversation", 0, 0, 0, 32}, {"stairs", -1, "conversation", math.MinInt64, math.MaxInt64, 0, 1 | 2},
	} {
		f.Add(s.query, s.k, s.scope, s.since, s.until, s.asOf, s.flags)
	}
	db := dbtest.New(f)
	ctx := context.Background()
	conv, other := uuid.New(), uuid.New()
	var old uuid.UUID
	require.NoError(f, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'the lighthouse keeper paints the stairs blue')`, conv).Scan(&old))
	_, err := db.Pool.Exec(ctx, `SELECT mneme.remember($1, 'the lighthouse keeper paints the stairs red', supersedes => $2)`, conv, old)
	require.NoError(f, err)
	_, err = db.Pool.Exec(ctx, `SELECT mneme.remember($1, 'the keeper of the other lighthouse')`, other)
	require.NoError(f, err)
	base := time.Now()
	params := []string{"conversation_id", "query", "k", "query_embedding", "since", "until", "at", "scope", "as_of", "include_history"}
	f.Fuzz(func(t *testing.T, query string, k int32, scope string, since, until, asOf int64, flags uint8) {
		var sinceArg, untilArg, asOfArg, scopeArg, emb any
		if flags&1 != 0 {
			sinceArg = fuzzTime(base, since)
		}
		if flags&2 != 0 {
			untilArg = fuzzTime(base, until)
		}
		if flags&8 != 0 {
			asOfArg = fuzzTime(base, asOf)
		}
		if scope != "" {
			scopeArg = scope
		}
		if flags&16 != 0 && !embed.IsBlank(query) {
			emb = query // embedded in SQL with the built-in embedder (which refuses blank text)
		}
		target := conv
		if flags&32 != 0 {
			target = uuid.New() // a conversation that does not exist
		}
		var n int
		err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.search(conversation_id => $1, query => $2, k => $3,
			query_embedding => CASE WHEN $4::text IS NULL THEN NULL ELSE mneme.hash_embed($4::text) END,
			since => $5::timestamptz, until => $6::timestamptz, scope => coalesce($7::text, 'conversation'),
			as_of => $8::timestamptz, include_history => $9)`,
			target, query, k, emb, sinceArg, untilArg, scopeArg, asOfArg, flags&4 != 0).Scan(&n)
		if requireDocumentedError(t, err, params...) == nil {
			require.LessOrEqual(t, n, int(k))
			if target != conv || flags&(1|2|8) != 0 {
				// Another conversation, a date range or a past belief may
				// rightly find nothing.
			} else if flags&4 == 0 {
				require.LessOrEqual(t, n, 2, "current beliefs only: the superseded memory is left out")
			}
		}
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.search($1, 'lighthouse stairs', 5)`, conv).Scan(&n))
		require.Equal(t, 1, n, "the current belief is found, whatever came before")
	})
}

// FuzzRemember: whatever content, label, title, source_ref, valid_until
// and supersedes an application sends, remember succeeds or raises a
// documented SQLSTATE naming the argument; the revise job of what it
// accepted does not fail (offline pipeline), and the conversation goes on.
// Run longer with: go test ./tests -run '^$' -fuzz FuzzRemember
func FuzzRemember(f *testing.F) {
	for _, s := range []struct {
		content, label, title, sourceRef string
		pinned                           bool
		validMinutes                     int64
		flags                            uint8
	}{
		{"Alice lives in Paris", "user_profile", "home", "chat:1", false, 60, 0},
		{"Alice lives in Rome", "general", "", "", true, 60, 1 | 2 | 4 | 8 | 16},
		{"\u200b\ufeff", "general", "", "", false, 60, 0}, {"x", "no-such-label", "", "", false, 60, 1},
		{"Alice", "project_apollo", strings.Repeat("t", 1001), "", false, 60, 1 | 2},
		{"Alice", "general", "", "https://user:secret@example.com/x?token=abc", false, 60, 4},
		{"Alice", "general", "", strings.Repeat("s", 513), false, 60, 4}, {"Alice moved", "general", "", "", false, -60, 8},
		{"Alice moved", "general", "", "", false, math.MaxInt64, 8}, {strings.Repeat("long fact ", 300), "general", "", "", false, 0, 16},
		{"Alice\x00", "general", "", "", false, 0, 0}, {"Alice does not live in Paris", "important", "", "", false, 0, 16 | 32},
	} {
		f.Add(s.content, s.label, s.title, s.sourceRef, s.pinned, s.validMinutes, s.flags)
	}
	db := dbtest.New(f)
	ctx := context.Background()
	base := time.Now()
	params := []string{"conversation_id", "content", "label", "pinned", "valid_until", "supersedes", "title", "source_ref", "at"}
	f.Fuzz(func(t *testing.T, content, label, title, sourceRef string, pinned bool, validMinutes int64, flags uint8) {
		conv := uuid.New()
		var prior uuid.UUID
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'Alice lives in Paris')`, conv).Scan(&prior))
		args := []string{"conversation_id => $1", "content => $2"}
		vals := []any{conv, content}
		add := func(name string, v any) {
			vals = append(vals, v)
			args = append(args, fmt.Sprintf("%s => $%d", name, len(vals)))
		}
		if flags&1 != 0 {
			add("label", label)
		}
		if flags&2 != 0 {
			add("title", title)
		}
		if flags&4 != 0 {
			add("source_ref", sourceRef)
		}
		if flags&8 != 0 {
			add("valid_until", fuzzTime(base, validMinutes)+"")
			args[len(args)-1] += "::timestamptz"
		}
		if flags&16 != 0 {
			add("supersedes", prior)
		}
		if flags&32 != 0 {
			add("pinned", pinned)
		}
		_, err := db.Pool.Exec(ctx, fmt.Sprintf(`SELECT mneme.remember(%s)`, strings.Join(args, ", ")), vals...)
		requireDocumentedError(t, err, params...)
		e := fuzzPipeline(t, db)
		e.drain()
		require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE conversation_id = $1 AND state = 'failed'`, conv), "nothing accepted fails a job")
		_, err = db.Pool.Exec(ctx, `SELECT mneme.remember($1, 'Bob lives in Oslo')`, conv)
		require.NoError(t, err)
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.search($1, 'Bob Oslo', 5)`, conv).Scan(&n))
		require.Positive(t, n, "the conversation goes on")
	})
}

// FuzzSetSetting: whatever key and JSON an operator sends, set_setting
// succeeds or raises a documented SQLSTATE naming the key; with what it
// accepted, a normal conversation (messages, memories, search, context)
// gets no undocumented error and no failed job. The settings are put back
// after each input. Run longer with: go test ./tests -run '^$' -fuzz FuzzSetSetting
func FuzzSetSetting(f *testing.F) {
	for _, s := range []struct {
		pick       uint8
		key, value string
	}{
		{0, "rrf_k", "-1"}, {0, "rrf_k", `"abc"`}, {0, "rrf_k", "1e308"}, {0, "label_weights", `{"general": -5}`},
		{0, "embedder", "42"}, {0, "embedder", `"external"`}, {0, "message_max_chars", "10"}, {0, "segment_min_messages", "1"},
		{0, "segment_gap_seconds", "0.001"}, {0, "message_max_future", `"0"`}, {0, "initial_stability_days", `{"general": 0.0001}`},
		{0, "vector_variant", `"pgvector"`}, {0, "nope", "1"}, {0, "", "null"}, {3, "", "{}"}, {7, "", "not json"},
		{0, "cleanup_interval", `"1 minute"`}, {0, "review_default_rating", `"again"`}, {0, "retrieve_candidates", "1"},
	} {
		f.Add(s.pick, s.key, s.value)
	}
	db := dbtest.New(f)
	ctx := context.Background()
	var snapshot []byte
	require.NoError(f, db.Pool.QueryRow(ctx, `SELECT jsonb_object_agg(key, value) FROM mneme.settings`).Scan(&snapshot))
	var keys []string
	rows, err := db.Pool.Query(ctx, `SELECT key FROM mneme.settings ORDER BY key`)
	require.NoError(f, err)
	keys, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, pick uint8, key, value string) {
		if key == "" {
			key = keys[int(pick)%len(keys)]
		}
		t.Cleanup(func() {
			_, err := db.Pool.Exec(ctx, `UPDATE mneme.settings s SET value = o.value FROM jsonb_each($1::jsonb) o
				WHERE s.key = o.key AND s.value IS DISTINCT FROM o.value`, snapshot)
			require.NoError(t, err)
			_, err = db.Pool.Exec(ctx, `DELETE FROM mneme.jobs`)
			require.NoError(t, err)
		})
		_, err := db.Pool.Exec(ctx, `SELECT mneme.set_setting($1, $2::jsonb)`, key, value)
		// Rule errors name the setting: setting "rrf_k" must be ...
		if pgErr := requireDocumentedError(t, err, "key", "value", "setting"); pgErr != nil {
			if pgErr.Code == "22023" && slices.Contains(keys, key) {
				require.Contains(t, pgErr.Message, key, "the error names the setting")
			}
			return
		}
		// A normal conversation under the accepted value: documented
		// errors at most (a tighter limit may refuse a message), no failed job.
		conv := uuid.New()
		at := time.Now().Add(-time.Hour)
		msgParams := []string{"conversation_id", "role", "content", "at"}
		for i := 0; i < 8; i++ {
			_, err := db.Pool.Exec(ctx, `SELECT mneme.add_message($1, 'user', $2, $3)`, conv,
				fmt.Sprintf("the lighthouse keeper paints the stairs, step %d", i), at.Add(time.Duration(i)*time.Minute))
			requireDocumentedError(t, err, msgParams...)
		}
		_, err = db.Pool.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'much later: the stairs are blue', $2)`, conv, at.Add(50*time.Minute))
		requireDocumentedError(t, err, msgParams...)
		_, err = db.Pool.Exec(ctx, `SELECT mneme.remember($1, 'the keeper likes blue stairs')`, conv)
		requireDocumentedError(t, err, "conversation_id", "content", "label")
		_, err = db.Pool.Exec(ctx, `SELECT mneme.segment_now($1)`, conv)
		requireDocumentedError(t, err, "conversation_id")
		searchParams := []string{"conversation_id", "query", "k", "budget", "setting"}
		_, err = db.Pool.Exec(ctx, `SELECT count(*) FROM mneme.retrieve($1, 'lighthouse stairs', 5)`, conv)
		requireDocumentedError(t, err, searchParams...)
		_, err = db.Pool.Exec(ctx, `SELECT mneme.context($1, 'lighthouse stairs', 200)`, conv)
		requireDocumentedError(t, err, searchParams...)
		e := fuzzPipeline(t, db)
		e.drain()
		var failed string
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT coalesce(string_agg(kind || ': ' || left(last_error, 200), '; '), '')
			FROM mneme.jobs WHERE state = 'failed'`).Scan(&failed))
		require.Empty(t, failed, "setting %s = %s: no job fails", key, value)
		_, err = db.Pool.Exec(ctx, `SELECT count(*) FROM mneme.search($1, 'lighthouse stairs', 5)`, conv)
		requireDocumentedError(t, err, searchParams...)
	})
}

// NaN, Infinity and mismatched dimensions are errors, never numbers that
// rank first or break later searches; jobs the sidecar could only fail on
// are refused when enqueued.
func TestHostileNumbers(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	conv := uuid.New()
	var mem uuid.UUID
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'a memory to review')`, conv).Scan(&mem))
	for _, c := range []struct {
		q    string
		args []any
		code string
	}{
		{`SELECT mneme.retrievability('NaN', now(), now())`, nil, "22023"},
		{`SELECT mneme.retrievability('Infinity', now(), now())`, nil, "22023"},
		{`SELECT mneme.retrievability(3, '-infinity', now())`, nil, "22008"},
		{`SELECT mneme.retrievability(3, now(), 'infinity')`, nil, "22008"},
		{`SELECT mneme.cosine_distance(ARRAY[1, 0]::real[], ARRAY[1, 0, 0]::real[])`, nil, "22023"},
		{`SELECT mneme.apply_review($1, 'good', 'NaN', 5, 'review', now(), 'heuristic', '{}', false, NULL)`, []any{mem}, "22023"},
		{`SELECT mneme.apply_review($1, 'good', 'Infinity', 5, 'review', now(), 'heuristic', '{}', false, NULL)`, []any{mem}, "22023"},
		{`SELECT mneme.apply_review($1, 'good', 10, 'NaN', 'review', now(), 'heuristic', '{}', false, NULL)`, []any{mem}, "22023"},
		{`SELECT mneme.apply_review($1, 'good', 10, 5, 'review', 'infinity', 'heuristic', '{}', false, NULL)`, []any{mem}, "22008"},
		{`SELECT mneme.enqueue_job('noop', NULL, '{}', NULL, 'infinity')`, nil, "22008"},
		{`SELECT mneme.enqueue_job('noop', NULL, '[1]')`, nil, "22023"},
		{`SELECT mneme.enqueue_job('segment', $1, '{"reason": "gap", "check": false}')`, []any{conv}, "22023"},
		{`SELECT mneme.enqueue_job('review', $1, '{"reviews": "all"}')`, []any{conv}, "22023"},
		{`SELECT * FROM mneme.vector_search($1, mneme.hash_embed('x'), 5, '2026-02-01', '2026-01-01')`, []any{conv}, "22023"},
		{`SELECT * FROM mneme.bm25_search($1, 'x', 5, '2026-02-01', '2026-01-01')`, []any{conv}, "22023"},
	} {
		_, err := db.Pool.Exec(ctx, c.q, c.args...)
		require.Error(t, err, c.q)
		require.Equal(t, c.code, sqlState(t, err), "%s: %v", c.q, err)
	}
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.search($1, 'memory review', 5)`, conv).Scan(&n))
	require.Equal(t, 1, n, "nothing stored broke the search")
	var s float64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT stability FROM mneme.memories WHERE id = $1`, mem).Scan(&s))
	require.False(t, math.IsNaN(s) || math.IsInf(s, 0))
}

// Text arguments have limits, and an error quotes at most a short prefix of
// what it rejects: a 1 MB argument gives a short error.
func TestLongArgumentsShortErrors(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	conv := uuid.New()
	var mem uuid.UUID
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'a memory')`, conv).Scan(&mem))
	huge := strings.Repeat("x", 1<<20)
	for _, c := range []struct {
		q    string
		args []any
		code string
	}{
		{`SELECT mneme.add_message($1, $2, 'hello there')`, []any{conv, huge}, "22023"},
		{`SELECT mneme.remember($1, 'fact', $2)`, []any{conv, huge}, "22023"},
		{`SELECT mneme.remember($1, 'fact', title => $2)`, []any{conv, huge}, "22001"},
		{`SELECT mneme.remember($1, 'fact', source_ref => $2)`, []any{conv, huge}, "22001"},
		{`SELECT mneme.forget($1, $2)`, []any{mem, huge}, "22001"},
		{`SELECT mneme.erase($1, $2)`, []any{mem, huge}, "22001"},
		{`SELECT * FROM mneme.search($1, $2, 5)`, []any{conv, huge}, "22001"},
		{`SELECT mneme.enqueue_job($1, NULL)`, []any{huge}, "22023"},
		{`SELECT mneme.set_setting($1, '1')`, []any{huge}, "22023"},
		{`SELECT mneme.set_tenant($1)`, []any{huge}, "22023"},
		{`SELECT mneme.create_tenant($1)`, []any{huge}, "22023"},
		{`SELECT mneme.set_setting('label_weights', jsonb_build_object($1::text, 1))`, []any{huge}, "22023"},
	} {
		_, err := db.Pool.Exec(ctx, c.q, c.args...)
		require.Error(t, err, c.q)
		require.Equal(t, c.code, sqlState(t, err), "%s", c.q)
		require.Less(t, len(err.Error()), 400, "%s: the error quotes a prefix at most", c.q)
	}
}

func TestAddMessageBadInput(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	c := newConv(t, db)
	for i := 0; i < 5; i++ {
		c.add(time.Minute, "a perfectly long message")
	}
	_, err := db.Pool.Exec(ctx, `SELECT mneme.add_pending_review($1, $2, 'q')`, c.id, []uuid.UUID{uuid.New()})
	require.NoError(t, err)
	before := counts(t, db)
	later := c.at.Add(time.Minute)
	cases := []struct {
		name    string
		sql     string
		args    []any
		state   string
		message string
	}{
		{"null conversation", `SELECT mneme.add_message(NULL, 'user', 'hello there', $1)`, []any{later}, "22004", "conversation_id"},
		{"null content", `SELECT mneme.add_message($1, 'user', NULL, $2)`, []any{c.id, later}, "22004", "content"},
		{"empty content", `SELECT mneme.add_message($1, 'user', '', $2)`, []any{c.id, later}, "22023", "content"},
		{"blank content", `SELECT mneme.add_message($1, 'user', E' \n\t', $2)`, []any{c.id, later}, "22023", "content"},
		{"unknown role", `SELECT mneme.add_message($1, 'robot', 'hello there', $2)`, []any{c.id, later}, "22023", "unknown role"},
		{"null role", `SELECT mneme.add_message($1, NULL, 'hello there', $2)`, []any{c.id, later}, "22004", "role"},
		{"too long", `SELECT mneme.add_message($1, 'user', $2, $3)`, []any{c.id, strings.Repeat("x", 100001), later}, "22001", "over the limit"},
		{"earlier than previous", `SELECT mneme.add_message($1, 'user', 'hello there', $2)`, []any{c.id, c.at.Add(-time.Second)}, "22008", "earlier than the previous"},
		{"zero-width content", `SELECT mneme.add_message($1, 'user', E'\u200b\ufeff\u200d', $2)`, []any{c.id, later}, "22023", "content"},
		{"control characters", `SELECT mneme.add_message($1, 'user', E'\x01\x02 \x7f', $2)`, []any{c.id, later}, "22023", "content"},
		{"infinite time", `SELECT mneme.add_message($1, 'user', 'hello there', 'infinity')`, []any{c.id}, "22008", "finite"},
		{"beyond year 9999", `SELECT mneme.add_message($1, 'user', 'hello there', '294000-01-01')`, []any{c.id}, "22008", "from year 1 to 9999"},
		{"before year 1", `SELECT mneme.add_message($1, 'user', 'hello there', '0100-01-01 BC')`, []any{c.id}, "22008", "from year 1 to 9999"},
		{"future beyond the skew", `SELECT mneme.add_message($1, 'user', 'hello there', now() + interval '2 hours')`, []any{c.id}, "22008", "in the future"},
		{"review null conversation", `SELECT mneme.add_pending_review(NULL, $1, 'q')`, []any{[]uuid.UUID{uuid.New()}}, "22004", "conversation_id"},
		{"review null ids", `SELECT mneme.add_pending_review($1, NULL, 'q')`, []any{c.id}, "22004", "memory_ids"},
		{"review null id inside", `SELECT mneme.add_pending_review($1, ARRAY[NULL]::uuid[], 'q')`, []any{c.id}, "22004", "memory_ids"},
		{"review null query", `SELECT mneme.add_pending_review($1, $2, NULL)`, []any{c.id, []uuid.UUID{uuid.New()}}, "22004", "query"},
		{"take null conversation", `SELECT mneme.take_pending_reviews(NULL)`, nil, "22004", "conversation_id"},
		{"bad speaker", `SELECT mneme.set_speakers($1, ARRAY['1bad'])`, []any{c.id}, "22023", "speaker"},
		{"unknown setting", `SELECT mneme.set_setting('nope', '1')`, nil, "22023", "unknown mneme setting"},
		{"fixed setting", `SELECT mneme.set_setting('embedding_dim', '3')`, nil, "55000", "fixed at migrate time"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := db.Pool.Exec(ctx, tc.sql, tc.args...)
			require.Error(t, err)
			require.Equal(t, tc.state, sqlState(t, err), err.Error())
			require.Contains(t, err.Error(), tc.message)
			require.Equal(t, before, counts(t, db), "nothing changed")
		})
	}
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
