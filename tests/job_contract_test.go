package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/jobs"
)

// The payload contract of each job kind (docs/pipelines.md, "One contract
// per job kind"): the Go type in sidecar/jobs/kinds.go, the rule in
// mneme.job_kinds and the builder mneme._<kind>_payload say the same.

// decodeStrict decodes payload into a new value of args' type, refusing
// any field the type does not have, and returns it.
func decodeStrict(t *testing.T, args jobs.Args, payload []byte) jobs.Args {
	t.Helper()
	v := reflect.New(reflect.TypeOf(args))
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(v.Interface()), "%s payload %s does not decode into %T", args.Kind(), payload, args)
	return v.Elem().Interface().(jobs.Args)
}

// normalJSON is b as a generic JSON value, with every string that is an
// RFC 3339 time rewritten in UTC (SQL writes +00:00, Go writes Z).
func normalJSON(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&v))
	var walk func(any) any
	walk = func(x any) any {
		switch x := x.(type) {
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		case string:
			if at, err := time.Parse(time.RFC3339Nano, x); err == nil {
				return at.UTC().Format(time.RFC3339Nano)
			}
		}
		return x
	}
	return walk(v)
}

// requireNoFieldLost: payload decodes strictly into args' type, and the
// decoded value, marshalled again, is the same JSON: no field dropped,
// renamed or added on the way.
func requireNoFieldLost(t *testing.T, args jobs.Args, payload []byte) jobs.Args {
	t.Helper()
	got := decodeStrict(t, args, payload)
	again, err := json.Marshal(got)
	require.NoError(t, err)
	require.Equal(t, normalJSON(t, payload), normalJSON(t, again), "%s payload %s lost or changed a field in %T", args.Kind(), payload, args)
	return got
}

func int64p(v int64) *int64 { return &v }

// TestJobContractGoTypesPassTheRule: each kind's Go type, with every field
// set and with the optional ones absent, marshalled and enqueued by the
// sidecar's login (mneme_worker) through mneme.enqueue_job, is accepted by
// the kind's rule, and what is stored decodes strictly back into the same
// value. A Go field the rule does not name fails too.
func TestJobContractGoTypesPassTheRule(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			ctx := context.Background()
			db := dbtest.New(t, dbtest.WithVector(variant))
			worker, _ := db.PoolAs(t, "mneme_worker")
			at := time.Date(2026, 11, 27, 9, 30, 15, 123456789, time.UTC)
			cases := []struct {
				name string
				args jobs.Args
			}{
				{"segment full", jobs.SegmentArgs{Reason: "gap", Check: false, ThroughMessageID: int64p(41),
					TriggerMessageID: int64p(42), NextThroughMessageID: int64p(9223372036854775807)}},
				{"segment check only", jobs.SegmentArgs{Check: true}},
				{"segment through only", jobs.SegmentArgs{ThroughMessageID: int64p(1)}},
				{"review full", jobs.ReviewArgs{
					Reviews: []jobs.PendingReview{
						{Query: "where does Ann live?", MemoryIDs: []string{uuid.NewString(), uuid.NewString()}},
						{Query: "", MemoryIDs: []string{}},
					},
					ContextMessageIDs: []int64{1, 2, 9223372036854775807},
					Context:           []jobs.ContextMessage{{ID: 3, Role: "user", Content: "Ann moved to Lyon", At: at}},
					ReviewedAt:        at,
				}},
				{"review required only", jobs.ReviewArgs{Reviews: []jobs.PendingReview{}, ReviewedAt: at}},
				// An imported queue may hold an entry without ids: handed
				// over without them, not as null.
				{"review entry without ids", jobs.ReviewArgs{Reviews: []jobs.PendingReview{{Query: "q"}}, ReviewedAt: at}},
				{"revise", jobs.ReviseArgs{MemoryID: uuid.New()}},
				{"cleanup", jobs.CleanupArgs{}},
				{"noop", jobs.NoopArgs{}},
				{"consolidate", jobs.ConsolidateArgs{Reason: "on_demand"}},
				{"consolidate required only", jobs.ConsolidateArgs{}},
			}
			tried := map[string]bool{}
			for _, c := range cases {
				tried[c.args.Kind()] = true
				conv := uuid.NullUUID{UUID: uuid.New(), Valid: true}
				if c.args.Kind() == "segment" { // enqueue_job refuses a segment job with nothing queued
					_, err := db.Pool.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'a message to segment')`, conv.UUID)
					require.NoError(t, err)
				}
				id, err := jobs.Enqueue(ctx, worker, conv, c.args)
				require.NoError(t, err, "%s: %+v refused by the rule", c.name, c.args)
				var kind string
				var stored []byte
				require.NoError(t, db.Pool.QueryRow(ctx, `SELECT kind, payload FROM mneme.jobs WHERE id = $1`, id).Scan(&kind, &stored))
				require.Equal(t, c.args.Kind(), kind, c.name)
				require.Equal(t, c.args, decodeStrict(t, c.args, stored), "%s: stored %s", c.name, stored)
			}
			var rules map[string]string
			rows, err := db.Pool.Query(ctx, `SELECT kind, payload_rule::text FROM mneme.job_kinds`)
			require.NoError(t, err)
			rules = map[string]string{}
			for rows.Next() {
				var k, r string
				require.NoError(t, rows.Scan(&k, &r))
				rules[k] = r
			}
			require.NoError(t, rows.Err())
			for _, a := range jobs.AllArgs() {
				require.True(t, tried[a.Kind()], "no payload of kind %s tried", a.Kind())
				typ := reflect.TypeOf(a)
				for i := range typ.NumField() {
					name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
					require.Contains(t, rules[a.Kind()], `$."`+name+`"`,
						"%T field %s (%q) is not in the %s rule of mneme.job_kinds", a, typ.Field(i).Name, name, a.Kind())
				}
			}

			// The required fields: a value without them is refused, and
			// nothing is written.
			var before int
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.jobs`).Scan(&before))
			for _, a := range []jobs.Args{jobs.SegmentArgs{Reason: "gap"}, jobs.ReviewArgs{ReviewedAt: at},
				jobs.ReviewArgs{Reviews: []jobs.PendingReview{}}, jobs.ReviseArgs{}} {
				_, err := jobs.Enqueue(ctx, worker, uuid.NullUUID{UUID: uuid.New(), Valid: true}, a)
				require.Error(t, err, "%#v was accepted", a)
				require.Equal(t, "22023", sqlState(t, err), "%#v: %v", a, err)
			}
			var after int
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.jobs`).Scan(&after))
			require.Equal(t, before, after)
		})
	}
}

// TestJobContractSQLBuildersDecode: each SQL builder's output, with every
// argument set and with the optional ones NULL, decodes strictly into its
// kind's Go type with no field lost; then the API functions that enqueue
// jobs (add_message, segment_now, remember, add_fact, add_pending_review
// past pending_reviews_max, schedule_cleanup) enqueue payloads that do too.
// Bad builder arguments raise a clear error.
func TestJobContractSQLBuildersDecode(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			ctx := context.Background()
			db := dbtest.New(t, dbtest.WithVector(variant))
			mid := uuid.New()
			at := time.Date(2026, 3, 4, 5, 6, 7, 891011000, time.UTC)
			cases := []struct {
				call string
				args []any
				want jobs.Args
			}{
				{`mneme._segment_payload('gap', false, 41, 42)`, nil, jobs.SegmentArgs{Reason: "gap", ThroughMessageID: int64p(41), TriggerMessageID: int64p(42)}},
				{`mneme._segment_payload(NULL, true, NULL, NULL)`, nil, jobs.SegmentArgs{Check: true}},
				{`mneme._segment_payload('check', true, 9223372036854775807, NULL)`, nil, jobs.SegmentArgs{Reason: "check", Check: true, ThroughMessageID: int64p(9223372036854775807)}},
				{`mneme._review_payload('[{"query": "q", "memory_ids": ["` + mid.String() + `"]}]', $1, ARRAY[3, 5]::bigint[])`, []any{at},
					jobs.ReviewArgs{Reviews: []jobs.PendingReview{{Query: "q", MemoryIDs: []string{mid.String()}}}, ContextMessageIDs: []int64{3, 5}, ReviewedAt: at}},
				{`mneme._review_payload('[]', $1, NULL)`, []any{at}, jobs.ReviewArgs{Reviews: []jobs.PendingReview{}, ReviewedAt: at}},
				{`mneme._revise_payload($1)`, []any{mid}, jobs.ReviseArgs{MemoryID: mid}},
				{`mneme._cleanup_payload()`, nil, jobs.CleanupArgs{}},
				{`mneme._noop_payload()`, nil, jobs.NoopArgs{}},
				{`mneme._consolidate_payload('quiet')`, nil, jobs.ConsolidateArgs{Reason: "quiet"}},
				{`mneme._consolidate_payload(NULL)`, nil, jobs.ConsolidateArgs{}},
			}
			built := map[string]bool{}
			for _, c := range cases {
				var payload []byte
				require.NoError(t, db.Pool.QueryRow(ctx, `SELECT `+c.call, c.args...).Scan(&payload), c.call)
				got := requireNoFieldLost(t, c.want, payload)
				if r, ok := got.(jobs.ReviewArgs); ok {
					r.ReviewedAt = r.ReviewedAt.UTC()
					got = r
				}
				require.Equal(t, c.want, got, "%s built %s", c.call, payload)
				built[c.want.Kind()] = true
			}
			for _, a := range jobs.AllArgs() {
				require.True(t, built[a.Kind()], "no builder of kind %s tried", a.Kind())
			}

			bad := []struct{ call, state string }{
				{`mneme._segment_payload('gap', NULL, 1, 1)`, "22004"},
				{`mneme._segment_payload('gap', false, NULL, 1)`, "22004"},
				{`mneme._segment_payload('gap', true, 0, 1)`, "22023"},
				{`mneme._review_payload(NULL, now(), NULL)`, "22004"},
				{`mneme._review_payload('[]', NULL, NULL)`, "22004"},
				{`mneme._review_payload('{}', now(), NULL)`, "22023"},
				{`mneme._review_payload('[]', now(), ARRAY[1, NULL]::bigint[])`, "22004"},
				{`mneme._revise_payload(NULL)`, "22004"},
				{`mneme._revise_payload('00000000-0000-0000-0000-000000000000')`, "22023"},
			}
			for _, b := range bad {
				_, err := db.Pool.Exec(ctx, `SELECT `+b.call)
				require.Error(t, err, b.call)
				require.Equal(t, b.state, sqlState(t, err), "%s: %v", b.call, err)
			}

			// The sites: every payload the API enqueued decodes strictly.
			exec := func(sql string, args ...any) {
				t.Helper()
				_, err := db.Pool.Exec(ctx, sql, args...)
				require.NoError(t, err, sql)
			}
			checked, gap, now := uuid.New(), uuid.New(), uuid.New()
			for i := range 5 {
				exec(`SELECT mneme.add_message($1, 'user', $2, $3)`, checked, fmt.Sprintf("we plan the garden, step %d of it", i), day1.Add(time.Duration(i)*time.Minute))
				if i < 4 { // the fifth, late, enqueues the job: a gap, not a check
					exec(`SELECT mneme.add_message($1, 'user', $2, $3)`, gap, fmt.Sprintf("a message %d", i), day1.Add(time.Duration(i)*time.Minute))
				}
			}
			exec(`SELECT mneme.add_message($1, 'user', 'much later', $2)`, gap, day3)
			exec(`SELECT mneme.add_message($1, 'user', 'a last word', $2)`, now, day1)
			exec(`SELECT mneme.segment_now($1)`, now)
			exec(`SELECT mneme.remember($1, 'Ann lives in Lyon')`, now)
			var msg int64
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT max(id) FROM mneme.messages WHERE conversation_id = $1`, checked).Scan(&msg))
			exec(`SELECT mneme.add_fact($1, 'Ann plans a garden', ARRAY[$2::bigint])`, checked, msg)
			exec(`SELECT mneme.set_setting('pending_reviews_max', '2')`)
			for i := range 3 {
				exec(`SELECT mneme.add_pending_review($1, ARRAY[$2::uuid], $3)`, checked, uuid.New(), fmt.Sprintf("query %d", i))
			}
			exec(`SELECT mneme.schedule_cleanup()`)
			exec(`SELECT mneme.consolidate($1)`, now)

			byKind := map[string]jobs.Args{}
			for _, a := range jobs.AllArgs() {
				byKind[a.Kind()] = a
			}
			rows, err := db.Pool.Query(ctx, `SELECT kind, payload FROM mneme.jobs ORDER BY id`)
			require.NoError(t, err)
			type row struct {
				Kind    string
				Payload []byte
			}
			stored, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
			require.NoError(t, err)
			seen := map[string]int{}
			reasons := map[string]bool{}
			for _, r := range stored {
				a, ok := byKind[r.Kind]
				require.True(t, ok, "job kind %s has no Go type", r.Kind)
				got := requireNoFieldLost(t, a, r.Payload)
				seen[r.Kind]++
				if s, ok := got.(jobs.SegmentArgs); ok {
					reasons[s.Reason] = true
					require.NotNil(t, s.ThroughMessageID, "segment payload %s", r.Payload)
				}
				if rv, ok := got.(jobs.ReviewArgs); ok {
					require.Len(t, rv.Reviews, 2, "review payload %s", r.Payload)
					require.NotEmpty(t, rv.ContextMessageIDs, "review payload %s", r.Payload)
				}
			}
			var kinds []string
			for k := range seen {
				kinds = append(kinds, k)
			}
			sort.Strings(kinds)
			require.Equal(t, []string{"cleanup", "consolidate", "review", "revise", "segment"}, kinds, "jobs: %v", seen)
			require.Equal(t, 1, seen["consolidate"])
			require.Equal(t, 2, seen["revise"])
			require.Equal(t, map[string]bool{"check": true, "gap": true, "segment_now": true}, reasons)
		})
	}
}

// TestJobContractEveryKindHasAGoType: every kind of mneme.job_kinds has a
// Go type in jobs.AllArgs and a builder mneme._<kind>_payload, and every Go
// type a kind: a kind added on one side only fails here.
func TestJobContractEveryKindHasAGoType(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	rows, err := db.Pool.Query(ctx, `
		SELECT k.kind, EXISTS (SELECT 1 FROM pg_catalog.pg_proc p
		                       WHERE p.pronamespace = 'mneme'::regnamespace AND p.proname = '_' || k.kind || '_payload'
		                         AND p.prorettype = 'jsonb'::regtype)
		FROM mneme.job_kinds k ORDER BY k.kind`)
	require.NoError(t, err)
	type kind struct {
		Name    string
		Builder bool
	}
	sqlKinds, err := pgx.CollectRows(rows, pgx.RowToStructByPos[kind])
	require.NoError(t, err)
	goKinds := map[string]bool{}
	for _, a := range jobs.AllArgs() {
		require.False(t, goKinds[a.Kind()], "kind %s twice in jobs.AllArgs", a.Kind())
		goKinds[a.Kind()] = true
	}
	for _, k := range sqlKinds {
		require.True(t, goKinds[k.Name], "job kind %s of mneme.job_kinds has no Go type in jobs.AllArgs (sidecar/jobs/kinds.go)", k.Name)
		require.True(t, k.Builder, "job kind %s has no payload builder mneme._%s_payload", k.Name, k.Name)
		delete(goKinds, k.Name)
	}
	require.Empty(t, goKinds, "Go types of kinds mneme.job_kinds does not list")
}

// TestJobContractKindsInSQLAreDeclared: every job kind the SQL layer names
// as a string (a kind compared, listed or enqueued) is a kind of the one
// declaration (jobs.Kinds), so a renamed or removed kind cannot leave a
// comparison that silently matches nothing. ('episodic' and 'semantic'
// are memory kinds.)
func TestJobContractKindsInSQLAreDeclared(t *testing.T) {
	t.Parallel()
	declared := map[string]bool{"episodic": true, "semantic": true}
	for _, k := range jobs.Kinds {
		declared[k.Name()] = true
	}
	files, err := filepath.Glob("../sql/*.sql")
	require.NoError(t, err)
	more, err := filepath.Glob("../sql/citus/*.sql")
	require.NoError(t, err)
	single := regexp.MustCompile(`\bkind\s*(?:=|<>|!=)\s*'([a-z_]+)'|'([a-z_]+)'\s*(?:=|<>|!=)\s*[a-z_.]*\bkind\b|enqueue_job\(\s*'([a-z_]+)'`)
	list := regexp.MustCompile(`\bkind\s+(?:NOT\s+)?IN\s*\(('[^)]*)\)`)
	literal := regexp.MustCompile(`'([a-z_]+)'`)
	seen := 0
	for _, f := range append(files, more...) {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var names []string
		for _, m := range single.FindAllStringSubmatch(string(b), -1) {
			names = append(names, m[1]+m[2]+m[3])
		}
		for _, m := range list.FindAllStringSubmatch(string(b), -1) {
			for _, l := range literal.FindAllStringSubmatch(m[1], -1) {
				names = append(names, l[1])
			}
		}
		for _, n := range names {
			require.True(t, declared[n], "%s names job kind %q, which jobs.Kinds (sidecar/jobs/kinds.go) does not declare", f, n)
			seen++
		}
	}
	require.Greater(t, seen, 20, "the patterns still find the SQL's kind names")
}
