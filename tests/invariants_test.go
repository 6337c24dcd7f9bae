package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/transfer"
	"github.com/mneme-memory/mneme/sidecar/ui"
)

// twoTenants makes tenants ta and tb, each with a conversation that has
// messages and a memory, and an admin login bound to ta.
type twoTenants struct {
	db           *dbtest.DB
	adminA       *pgxpool.Pool
	adminAURL    string
	convA, convB uuid.UUID
	memA, memB   uuid.UUID
	msgsB        []int64
}

func newTwoTenants(t *testing.T, variant string) *twoTenants {
	t.Helper()
	ctx := context.Background()
	db := dbtest.New(t, dbtest.WithVector(variant))
	w := &twoTenants{db: db, convA: uuid.New(), convB: uuid.New()}
	w.adminA, w.adminAURL = db.PoolAs(t, "mneme_admin")
	for _, tn := range []string{"ta", "tb"} {
		_, err := db.Pool.Exec(ctx, `SELECT mneme.create_tenant($1)`, tn)
		require.NoError(t, err)
	}
	_, err := db.Pool.Exec(ctx, `SELECT mneme.bind_login($1, 'ta')`, loginOf(t, w.adminAURL))
	require.NoError(t, err)
	for tn, conv := range map[string]uuid.UUID{"ta": w.convA, "tb": w.convB} {
		require.NoError(t, inTenant(t, db.Pool, tn, func(tx pgx.Tx) error {
			for i := 0; i < 3; i++ {
				var id int64
				if err := tx.QueryRow(ctx, `SELECT mneme.add_message($1, 'user', $2)`, conv,
					fmt.Sprintf("%s says message %d about the ledger.", tn, i)).Scan(&id); err != nil {
					return err
				}
				if tn == "tb" {
					w.msgsB = append(w.msgsB, id)
				}
			}
			var mem uuid.UUID
			if err := tx.QueryRow(ctx, `SELECT mneme.remember($1, $2)`, conv, "The "+tn+" ledger is in the cabinet.").Scan(&mem); err != nil {
				return err
			}
			if tn == "ta" {
				w.memA = mem
			} else {
				w.memB = mem
			}
			return nil
		}))
	}
	return w
}

// pgErr is the PostgreSQL error of err (nil when it is none).
func pgErr(err error) *pgconn.PgError {
	var pg *pgconn.PgError
	if err != nil && errors.As(err, &pg) {
		return pg
	}
	return nil
}

// A row references only rows of its own tenant, whoever writes it: a bound
// admin of ta cannot make a memory of ta name tb's messages as its sources
// (which a purge would then delete: issue 47 item 1), nor a review or an
// episode name tb's memory. The refusal is 23503 with
// the same words for another tenant's row and for a row that does not
// exist, so it tells nothing about tb. tb's rows are unchanged. Fails on
// the code before sql/015-invariants.sql, which accepted each of them.
func TestTenantReferencesStayInTenant(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			ctx := context.Background()
			w := newTwoTenants(t, variant)
			before := tenantFingerprints(t, w.db)["tb"]
			missing := uuid.New()
			memoryLine := func(sources []int64) string {
				b, _ := json.Marshal([]map[string]any{{"id": uuid.New(), "kind": "semantic", "content": "A planted fact.",
					"stability": 10, "difficulty": 5, "surprise": 0, "fsrs_state": "review", "last_reviewed_at": "2026-01-01T00:00:00Z",
					"review_count": 0, "label": "general", "pinned": false, "status": "inactive", "confidence_score": 1,
					"source_type": "import", "source_message_ids": sources, "created_at": "2026-01-01T00:00:00Z",
					"updated_at": "2026-01-01T00:00:00Z"}})
				return string(b)
			}
			reviewLine := func(mem uuid.UUID) string {
				b, _ := json.Marshal([]map[string]any{{"memory": mem, "rating": "good", "reviewer": "heuristic", "defaulted": false,
					"stability_before": 1, "stability_after": 2, "difficulty_before": 5, "difficulty_after": 5,
					"state_before": "review", "state_after": "review", "last_reviewed_before": "2026-01-01T00:00:00Z",
					"reviewed_at": "2026-01-02T00:00:00Z", "created_at": "2026-01-02T00:00:00Z"}})
				return string(b)
			}
			messageLine := func(episode uuid.UUID) string {
				b, _ := json.Marshal([]map[string]any{{"role": "user", "content": "A planted message.",
					"created_at": "2026-01-01T00:00:00Z", "consumed_at": "2026-01-01T00:00:00Z", "episode": episode}})
				return string(b)
			}
			attempt := func(q string, args ...any) error {
				tx, err := w.adminA.Begin(ctx)
				require.NoError(t, err)
				defer func() { _ = tx.Rollback(ctx) }()
				if _, err := tx.Exec(ctx, q, args...); err != nil {
					return err
				}
				return tx.Commit(ctx) // the forward references are checked at commit
			}
			for _, c := range []struct {
				name           string
				sql            string
				foreign, unset []any
				foreignID      string
				unsetID        string
			}{
				{"source messages", `SELECT mneme.import_memories($1, $2::jsonb)`,
					[]any{w.convA, memoryLine(w.msgsB)}, []any{w.convA, memoryLine([]int64{w.msgsB[len(w.msgsB)-1] + 1000})},
					fmt.Sprint(w.msgsB[0]), fmt.Sprint(w.msgsB[len(w.msgsB)-1] + 1000)},
				{"review memory", `SELECT mneme.import_reviews($1, $2::jsonb)`,
					[]any{w.convA, reviewLine(w.memB)}, []any{w.convA, reviewLine(missing)}, w.memB.String(), missing.String()},
				{"episode", `SELECT mneme.import_messages($1, $2::jsonb)`,
					[]any{w.convA, messageLine(w.memB)}, []any{w.convA, messageLine(missing)}, w.memB.String(), missing.String()},
			} {
				errForeign := attempt(c.sql, c.foreign...)
				errUnset := attempt(c.sql, c.unset...)
				require.Error(t, errForeign, "%s: another tenant's row is refused", c.name)
				require.Error(t, errUnset, "%s: a row that does not exist is refused", c.name)
				pf, pu := pgErr(errForeign), pgErr(errUnset)
				require.NotNil(t, pf, c.name)
				require.NotNil(t, pu, c.name)
				require.Equal(t, "23503", pf.Code, "%s: %v", c.name, errForeign)
				require.Equal(t, "23503", pu.Code, "%s: %v", c.name, errUnset)
				require.Equal(t, strings.ReplaceAll(pf.Message, c.foreignID, "X"), strings.ReplaceAll(pu.Message, c.unsetID, "X"),
					"%s: the same words whether the row is another tenant's or none", c.name)
				require.Contains(t, pf.Message, "is not a")
			}
			require.Equal(t, before, tenantFingerprints(t, w.db)["tb"], "tb's rows are as they were")

			// The sidecar sees every tenant: its writes are checked too.
			_, err := w.db.Pool.Exec(ctx, `UPDATE mneme.memories SET supersedes_id = $1 WHERE id = $2`, w.memB, w.memA)
			require.Equal(t, "23503", sqlState(t, err), "a lineage link to another tenant's memory")
			_, err = w.db.Pool.Exec(ctx, `UPDATE mneme.memories SET source_message_ids = $1 WHERE id = $2`, w.msgsB, w.memA)
			require.Equal(t, "23503", sqlState(t, err), "sources of another tenant")

			// A pending review appended to a conversation's list (as retrieve
			// does; the check reads only the entries added) may name the
			// tenant's memories, not another tenant's.
			appendReview := `UPDATE mneme.message_queue SET pending_reviews = coalesce(pending_reviews, '[]'::jsonb)
				|| jsonb_build_array(jsonb_build_object('query', 'planted', 'memory_ids', jsonb_build_array($1::text))) WHERE id = $2`
			_, err = w.db.Pool.Exec(ctx, appendReview, w.memA, w.convA)
			require.NoError(t, err, "a pending review of the tenant's own memory")
			_, err = w.db.Pool.Exec(ctx, appendReview, w.memA, w.convA)
			require.NoError(t, err, "the same entry twice")
			_, err = w.db.Pool.Exec(ctx, appendReview, w.memB, w.convA)
			require.Equal(t, "23503", sqlState(t, err), "a pending review appended that names another tenant's memory")
			// Not an append (the list no longer begins with the old one): every
			// entry that is new is checked.
			_, err = w.db.Pool.Exec(ctx, `UPDATE mneme.message_queue SET pending_reviews = jsonb_set(pending_reviews, '{0,memory_ids}',
				jsonb_build_array($1::text)) WHERE id = $2`, w.memB, w.convA)
			require.Equal(t, "23503", sqlState(t, err), "an entry rewritten in place that names another tenant's memory")
		})
	}
}

// The mem0 import's conversation of a user is derived with the tenant's
// own key: two tenants import the same mem0 user, each into its own
// conversation, and neither can take the other's id first. Before, the id
// was uuid5("user:<id>") in every tenant: a second tenant got 42501
// ("belongs to another tenant"), and an app login of one tenant that
// created that id with add_message blocked the other's import.
func TestMem0ConversationsAreTheTenants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	admin := db.As(t, "mneme_admin")
	app := appWithTenants(t, db, "ta", "tb")
	_, err := db.Pool.Exec(ctx, `SELECT mneme.create_tenant('tc')`)
	require.NoError(t, err)
	// tc's application takes the id every tenant's "alex" had before.
	legacy := uuid.NewSHA1(uuid.MustParse("6d656d30-0000-5000-8000-6d6e656d6500"), []byte("user:alex"))
	require.NoError(t, inTenant(t, app, "tc", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'I got here first.')`, legacy)
		return err
	}))
	file := []byte(`[{"id": "m1", "memory": "Likes green tea", "user_id": "alex", "created_at": "2024-01-01T00:00:00Z"}]`)
	convs := map[string]uuid.UUID{}
	for _, tn := range []string{"ta", "tb"} {
		conn, err := pgx.Connect(ctx, admin)
		require.NoError(t, err)
		res, err := transfer.ImportMem0(ctx, conn, bytes.NewReader(file), transfer.Mem0Options{Tenant: tn})
		conn.Close(ctx)
		require.NoError(t, err, "tenant %s imports alex", tn)
		require.EqualValues(t, 1, res.Memories)
		convs[tn] = res.Conversations["user:alex"]
		require.NotEqual(t, legacy, convs[tn])
	}
	require.NotEqual(t, convs["ta"], convs["tb"], "each tenant has its own conversation for alex")

	// Again: the same conversation, nothing new.
	conn, err := pgx.Connect(ctx, admin)
	require.NoError(t, err)
	defer conn.Close(ctx)
	res, err := transfer.ImportMem0(ctx, conn, bytes.NewReader(file), transfer.Mem0Options{Tenant: "ta"})
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Skipped)
	require.Equal(t, convs["ta"], res.Conversations["user:alex"])

	// named_conversation: stable in a tenant, distinct across tenants.
	var a1, a2, b1 uuid.UUID
	require.NoError(t, inTenant(t, app, "ta", func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT mneme.named_conversation('x')`).Scan(&a1); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT mneme.named_conversation('x')`).Scan(&a2)
	}))
	require.NoError(t, inTenant(t, app, "tb", func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT mneme.named_conversation('x')`).Scan(&b1)
	}))
	require.Equal(t, a1, a2)
	require.NotEqual(t, a1, b1)
	require.EqualValues(t, 8, a1.Version())
	var n int
	_, admin2 := db.PoolAs(t, "mneme_admin")
	conn2, err := pgx.Connect(ctx, admin2)
	require.NoError(t, err)
	defer conn2.Close(ctx)
	err = conn2.QueryRow(ctx, `SELECT count(*) FROM mneme.instance_key`).Scan(&n)
	require.Equal(t, "42501", sqlState(t, err), "an admin does not read the key either")
	err = app.QueryRow(ctx, `SELECT count(*) FROM mneme.instance_key`).Scan(&n)
	require.Equal(t, "42501", sqlState(t, err), "the keys are the functions' only")
}

// An audit reason cannot be forged: the reason of a "reactivated" event
// comes from a mark only mneme's functions write (mneme._mark), not from a
// setting any session may SET, nor from the text of the call stack, which
// a temporary function whose name holds a newline and "PL/pgSQL function
// mneme.reactivate(" imitated (issue 47 item 3: the forged reason landed
// in the event before).
func TestAuditReasonsCannotBeForged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	app, _ := db.PoolAs(t, "mneme_app")
	conv := uuid.New()
	var mem uuid.UUID
	require.NoError(t, app.QueryRow(ctx, `SELECT mneme.remember($1, 'The spare key is under the blue pot.')`, conv).Scan(&mem))
	_, err := db.Pool.Exec(ctx, `UPDATE mneme.memories SET status = 'inactive', status_reason = 'faded' WHERE id = $1`, mem)
	require.NoError(t, err)

	fn := "pg_temp.\"x\nPL/pgSQL function mneme.reactivate(uuid) line 1 at SQL statement\n\""
	require.NoError(t, pgx.BeginFunc(ctx, app, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL mneme.event_reason = 'forged by the application'`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE FUNCTION `+fn+`(id uuid) RETURNS void LANGUAGE plpgsql
			AS $f$ BEGIN PERFORM mneme.pin(id); END $f$`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT `+fn+`($1)`, mem)
		return err
	}))
	var reason string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT reason FROM mneme.memory_events WHERE memory_id = $1 AND event = 'reactivated'`, mem).Scan(&reason))
	require.Equal(t, "pinned", reason, "the reason is mneme's, not the caller's")

	// The marks are out of the caller's reach.
	_, err = app.Exec(ctx, `INSERT INTO mneme.call_marks VALUES (pg_backend_pid(), pg_current_xact_id(), 'event_reason', 'x')`)
	require.Equal(t, "42501", sqlState(t, err))
	_, err = app.Exec(ctx, `SELECT mneme._mark('event_reason', 'x')`)
	require.Equal(t, "42501", sqlState(t, err))
}

// Erase is final on every import path (issue 47 item 2): a file exported
// before an erase brings back neither the erased episode (its messages,
// the facts taken from them, their reviews and events) nor an erased
// conversation, whether the import keeps the file's ids or gives new ones
// (--conversations new: the tombstones are consulted with the file's ids,
// before remapping). What was not erased comes in; the result counts what
// was left out. The import functions refuse an erased id themselves
// (22023), for any other path. Before, the erased rows came back.
func TestImportLeavesErasedOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newPipelineEnv(t, false)
	admin := e.db.As(t, "mneme_admin")
	day := time.Now().UTC().Truncate(time.Minute).Add(-48 * time.Hour)
	e.session(day, [][2]string{
		{"user", "Zqvx my locker code is 4471 at the gym."}, {"assistant", "Noted, locker 4471."},
		{"user", "Zqvx the gym is on Harbour street."}, {"assistant", "Harbour street, got it."},
		{"user", "Zqvx I go there on Tuesdays."},
	})
	e.segmentNow()
	e.drain()
	e.session(day.Add(24*time.Hour), [][2]string{
		{"user", "My sister lives in Lisbon."}, {"assistant", "Lisbon is lovely."},
		{"user", "She works as a translator there."}, {"assistant", "A good job for Lisbon."},
		{"user", "We talk every Sunday."},
	})
	e.segmentNow()
	e.drain()
	other := uuid.New()
	_, err := e.db.Pool.Exec(ctx, `SELECT mneme.remember($1, 'Zqvy the spare key is under the blue pot.')`, other)
	require.NoError(t, err)
	file := exportAll(t, e.db.URL, transfer.ExportOptions{Conversations: []uuid.UUID{e.conv, other}})

	var episode uuid.UUID
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT id FROM mneme.memories WHERE conversation_id = $1 AND kind = 'episodic'
		AND content LIKE '%locker%'`, e.conv).Scan(&episode))
	_, err = e.db.Pool.Exec(ctx, `SELECT mneme.erase($1, 'user request')`, episode)
	require.NoError(t, err)
	_, err = e.db.Pool.Exec(ctx, `SELECT mneme.erase_conversation($1, 'user request')`, other)
	require.NoError(t, err)
	erasedText := func() int {
		return e.count(`SELECT (SELECT count(*) FROM mneme.messages WHERE content LIKE '%Zqv%')
			+ (SELECT count(*) FROM mneme.memories WHERE content LIKE '%Zqv%' OR summary LIKE '%Zqv%')
			+ (SELECT count(*) FROM mneme.memory_events WHERE reason LIKE '%Zqv%')
			+ (SELECT count(*) FROM mneme.message_queue WHERE pending_reviews::text LIKE '%Zqv%')`)
	}
	require.Zero(t, erasedText())
	memories := e.count(`SELECT count(*) FROM mneme.memories`)

	// The same ids: the conversation that holds the file's memories (but the
	// erased ones) was imported before; the erased one stays out.
	res, err := importFile(t, admin, file, transfer.ImportOptions{})
	require.NoError(t, err, "a conversation imported before, erased in part since, is recognised")
	require.EqualValues(t, 1, res.Skipped)
	require.EqualValues(t, 1, res.ErasedConversations)
	require.Positive(t, res.ErasedRows)
	require.Zero(t, erasedText(), "nothing erased came back")
	require.Equal(t, memories, e.count(`SELECT count(*) FROM mneme.memories`))

	// New ids: what was not erased comes in again, under new ids.
	res, err = importFile(t, admin, file, transfer.ImportOptions{NewIDs: true})
	require.NoError(t, err)
	require.EqualValues(t, 1, res.ErasedConversations)
	require.Positive(t, res.ErasedRows)
	require.Zero(t, erasedText(), "nothing erased came back under a new id")
	require.Greater(t, e.count(`SELECT count(*) FROM mneme.memories`), memories, "the rest came in")
	require.Positive(t, e.count(`SELECT count(*) FROM mneme.messages WHERE content LIKE 'My sister%' AND conversation_id <> $1`, e.conv))

	// Any other path: the import functions refuse an erased id.
	_, err = e.db.Pool.Exec(ctx, `SELECT mneme.import_conversation($1::jsonb)`,
		fmt.Sprintf(`{"type": "conversation", "id": %q, "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"}`, other))
	require.Equal(t, "22023", sqlState(t, err))
	require.ErrorContains(t, err, "was erased")
	_, err = e.db.Pool.Exec(ctx, `SELECT mneme.import_memories($1, $2::jsonb)`, e.conv,
		fmt.Sprintf(`[{"id": %q, "kind": "episodic", "content": "back", "stability": 1, "difficulty": 5, "fsrs_state": "review",
			"last_reviewed_at": "2026-01-01T00:00:00Z", "review_count": 0, "label": "general", "pinned": false, "status": "active",
			"confidence_score": 1, "source_type": "conversation", "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"}]`, episode))
	require.Equal(t, "22023", sqlState(t, err))
}

// One definition of each limit, met by every writer (issue 47 item 6 of
// the probe, item 4 of the work): what remember and add_message refuse,
// the import functions refuse too: a 150,000-character or zero-width-only
// message, a memory over message_max_chars, metadata nested 40 deep. The
// limits are sql/015-invariants.sql's triggers; before them the import
// took each of these.
func TestLimitsHoldOnEveryPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	admin, _ := db.PoolAs(t, "mneme_admin")
	conv := uuid.New()
	_, err := db.Pool.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'hello there, a first message')`, conv)
	require.NoError(t, err)
	long := strings.Repeat("word ", 30000) // 150,000 characters
	msg := func(content string) string {
		b, _ := json.Marshal([]map[string]any{{"role": "user", "content": content, "created_at": "2026-01-01T00:00:00Z"}})
		return string(b)
	}
	nested := any("leaf")
	for i := 0; i < 40; i++ {
		nested = []any{nested}
	}
	mem := func(content string, metadata any) string {
		b, _ := json.Marshal([]map[string]any{{"id": uuid.New(), "kind": "semantic", "content": content, "stability": 10,
			"difficulty": 5, "surprise": 0, "fsrs_state": "review", "last_reviewed_at": "2026-01-01T00:00:00Z", "review_count": 0,
			"label": "general", "pinned": false, "status": "active", "confidence_score": 1, "source_type": "import",
			"metadata": metadata, "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"}})
		return string(b)
	}
	for _, c := range []struct {
		name, sql, state string
		args             []any
	}{
		{"long message", `SELECT mneme.import_messages($1, $2::jsonb)`, "22001", []any{conv, msg(long)}},
		{"zero-width message", `SELECT mneme.import_messages($1, $2::jsonb)`, "22023", []any{conv, msg("\u200b\u200b\ufeff")}},
		{"long memory", `SELECT mneme.import_memories($1, $2::jsonb)`, "22001", []any{conv, mem(long, map[string]any{})}},
		{"blank memory", `SELECT mneme.import_memories($1, $2::jsonb)`, "22023", []any{conv, mem("\u2060 \u200b", map[string]any{})}},
		{"deep metadata", `SELECT mneme.import_memories($1, $2::jsonb)`, "22023", []any{conv, mem("A fact.", map[string]any{"x": nested})}},
		{"long remember", `SELECT mneme.remember($1, $2)`, "22001", []any{conv, long}},
		{"long add_message", `SELECT mneme.add_message($1, 'user', $2)`, "22001", []any{conv, long}},
	} {
		_, err := admin.Exec(ctx, c.sql, c.args...)
		require.Error(t, err, c.name)
		require.Equal(t, c.state, sqlState(t, err), "%s: %v", c.name, err)
	}
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM mneme.messages) + (SELECT count(*) FROM mneme.memories)`).Scan(&n))
	require.Equal(t, 1, n, "nothing over a limit was written")

	// Within the limits: in.
	_, err = admin.Exec(ctx, `SELECT mneme.import_memories($1, $2::jsonb)`, conv, mem("A fact.", map[string]any{"a": map[string]any{"b": 1}}))
	require.NoError(t, err)
}

// The Go side reads any time the SQL side stores (issue 47 item 7 of the
// probe): a memory whose times are 'infinity' and '-infinity' and a
// message at '-infinity' show in the UI's pages (200, not a 500 "cannot
// scan Infinity into *time.Time"), and a revise job over such memories
// completes (it failed on "-Infinity" before).
func TestInfiniteTimesRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newPipelineEnv(t, false)
	var m1, m2 uuid.UUID
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'The boat is moored at pier four.')`, e.conv).Scan(&m1))
	_, err := e.db.Pool.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'Where is the boat moored again?')`, e.conv)
	require.NoError(t, err)
	_, err = e.db.Pool.Exec(ctx, `UPDATE mneme.memories SET created_at = '-infinity', valid_until = 'infinity',
		last_confirmed_at = 'infinity', source_first_at = '-infinity', source_last_at = 'infinity' WHERE id = $1`, m1)
	require.NoError(t, err)
	_, err = e.db.Pool.Exec(ctx, `UPDATE mneme.messages SET created_at = '-infinity' WHERE conversation_id = $1`, e.conv)
	require.NoError(t, err)
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'The boat is moored at pier five now.')`, e.conv).Scan(&m2))
	_, err = e.db.Pool.Exec(ctx, `UPDATE mneme.memories SET created_at = 'infinity' WHERE id = $1`, m2)
	require.NoError(t, err)

	pool, _ := e.db.PoolAs(t, "mneme_admin")
	s, err := ui.New(ctx, ui.Options{Pool: pool})
	require.NoError(t, err)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	for _, path := range []string{"/", "/conversations/" + e.conv.String(), "/memories/" + m1.String(), "/memories/" + m2.String()} {
		res, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode, "%s: %s", path, body)
	}

	e.drain()
	var failed int
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.jobs WHERE state = 'failed'`).Scan(&failed))
	require.Zero(t, failed, "the revise jobs over infinite times complete")
	require.Positive(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE kind = 'revise' AND state = 'done'`))
}

// Error codes follow one rule (issue 47 item 8 of the probe): a NULL
// argument is 22004, a wrong value 22023, a time out of range 22008.
// valid_until '-infinity', 'infinity' and '10000-01-01' are all 22008
// (before, the two last were accepted and the tenant's own export then
// failed to import); and a memory remember accepts at the ends of its
// range exports and imports again.
func TestErrorCodesFollowOneRule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	conv := uuid.New()
	var mem uuid.UUID
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'The lighthouse is painted red.', valid_until => '9999-12-31 23:00:00+00')`,
		conv).Scan(&mem))
	for _, c := range []struct{ sql, state string }{
		{`SELECT mneme.remember('` + conv.String() + `', 'x y z', valid_until => '-infinity')`, "22008"},
		{`SELECT mneme.remember('` + conv.String() + `', 'x y z', valid_until => 'infinity')`, "22008"},
		{`SELECT mneme.remember('` + conv.String() + `', 'x y z', valid_until => '10000-01-01')`, "22008"},
		{`SELECT * FROM mneme.bm25_search(NULL, 'lighthouse')`, "22004"},
		{`SELECT * FROM mneme.bm25_search('` + conv.String() + `', NULL)`, "22004"},
		{`SELECT * FROM mneme.vector_search('` + conv.String() + `', NULL)`, "22004"},
		{`SELECT * FROM mneme.search('` + conv.String() + `', 'lighthouse', include_history => NULL)`, "22004"},
		{`SELECT mneme.record_retrieval('` + conv.String() + `', '  ', ARRAY['` + mem.String() + `']::uuid[])`, "22023"},
		{`SELECT mneme.record_retrieval('` + conv.String() + `', NULL, ARRAY['` + mem.String() + `']::uuid[])`, "22004"},
		{`SELECT mneme.auto_label('Meet on Friday', 'infinity')`, "22008"},
		{`SELECT mneme.episode_label(ARRAY['Meet on Friday'], '-infinity')`, "22008"},
	} {
		_, err := db.Pool.Exec(ctx, c.sql)
		require.Error(t, err, c.sql)
		require.Equal(t, c.state, sqlState(t, err), "%s: %v", c.sql, err)
	}

	// What remember accepted round-trips.
	admin := db.As(t, "mneme_admin")
	file := exportAll(t, db.URL, transfer.ExportOptions{})
	_, err := importFile(t, admin, file, transfer.ImportOptions{Tenant: "copy", NewIDs: true})
	require.NoError(t, err, "the export of what remember accepts imports")
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.memories WHERE tenant_id = 'copy' AND valid_until = '9999-12-31 23:00:00+00'`).Scan(&n))
	require.Equal(t, 1, n)
}

// A bad job does not cost its conversation its messages (issue 47 item 9
// of the probe): a segment job its handler rejects as malformed (a message
// id written 5.0, which the payload rule lets through and Go's decoder
// refuses) fails alone and leaves the messages queued for the next valid
// segmentation; retry_job replaces the unreadable payload, saying so, and
// the retried job completes; enqueue_job refuses a segment job for a
// conversation with nothing queued. Before, the messages were set aside
// at each failure, and the empty job failed after five attempts saying
// that other segmentations had consumed its messages.
func TestBadSegmentJobKeepsMessagesQueued(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newPipelineEnv(t, false)
	for i := 0; i < 3; i++ {
		e.say(time.Now().UTC().Add(time.Duration(i-10)*time.Minute).Format(time.RFC3339), "user", fmt.Sprintf("Message %d about the garden.", i))
	}
	var lastID int64
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT max(id) FROM mneme.messages WHERE conversation_id = $1`, e.conv).Scan(&lastID))
	_, err := e.db.Pool.Exec(ctx, `DELETE FROM mneme.jobs WHERE conversation_id = $1`, e.conv)
	require.NoError(t, err)
	var job int64
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT mneme.enqueue_job('segment', $1, $2::jsonb)`, e.conv,
		fmt.Sprintf(`{"check": false, "through_message_id": %d.0}`, lastID)).Scan(&job))
	e.drain()
	var state, lastError string
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT state, last_error FROM mneme.jobs WHERE id = $1`, job).Scan(&state, &lastError))
	require.Equal(t, "failed", state, "the handler rejects the payload")
	queued := func() int {
		return e.count(`SELECT count(*) FROM mneme.messages WHERE conversation_id = $1 AND consumed_at IS NULL AND set_aside_job_id IS NULL`, e.conv)
	}
	require.Equal(t, 3, queued(), "the messages stay queued: %s", lastError)

	conn, notices := noticeConn(t, e.db.URL)
	_, err = conn.Exec(ctx, `SELECT mneme.retry_job($1)`, job)
	require.NoError(t, err)
	require.NotEmpty(t, *notices, "retry_job says what it changed")
	e.drain()
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT state FROM mneme.jobs WHERE id = $1`, job).Scan(&state))
	require.Equal(t, "done", state, "the retried job completes")

	empty := uuid.New()
	_, err = e.db.Pool.Exec(ctx, `SELECT mneme.remember($1, 'A conversation without messages.')`, empty)
	require.NoError(t, err)
	_, err = e.db.Pool.Exec(ctx, `SELECT mneme.enqueue_job('segment', $1, '{"check": true}')`, empty)
	require.Equal(t, "22023", sqlState(t, err), "nothing to segment")
}

// The invariant and limit triggers run on Citus too, in their Citus form
// (sql/015-invariants.sql: within the row's conversation, the shard the
// trigger reads), for every writer, here the sidecar's role, which sees
// every tenant: a memory's sources of another tenant, a review of another
// conversation's memory, an event of another tenant's conversation, a job
// of another tenant's conversation and a message over its limit are
// refused. On one server the same writes are refused by the one-server
// form (TestTenantReferencesStayInTenant, TestLimitsHoldOnEveryPath).
func TestCitusInvariantTriggers(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			ctx := context.Background()
			w := newTwoTenants(t, variant)
			var triggers []string
			rows, err := w.db.Pool.Query(ctx, `SELECT tgrelid::regclass || ': ' || tgname FROM pg_trigger
				WHERE tgrelid IN ('mneme.memories'::regclass, 'mneme.jobs'::regclass) AND NOT tgisinternal ORDER BY 1`)
			require.NoError(t, err)
			for rows.Next() {
				var n string
				require.NoError(t, rows.Scan(&n))
				triggers = append(triggers, n)
			}
			t.Logf("triggers: %v", triggers)
			before := tenantFingerprints(t, w.db)["tb"]
			for _, c := range []struct {
				name, sql string
				args      []any
				code      string
			}{
				{"sources of another tenant", `UPDATE mneme.memories SET source_message_ids = $1 WHERE id = $2`, []any{w.msgsB, w.memA}, "23503"},
				{"a review of another conversation's memory", `INSERT INTO mneme.review_log (memory_id, conversation_id, tenant_id, rating, reviewer,
					stability_before, stability_after, difficulty_before, difficulty_after, state_before, state_after, reviewed_at)
					VALUES ($1, $2, 'ta', 'good', 'heuristic', 1, 2, 5, 5, 'review', 'review', now())`, []any{w.memB, w.convA}, "23503"},
				{"an event in another tenant's conversation", `INSERT INTO mneme.memory_events (memory_id, conversation_id, tenant_id, event, actor)
					VALUES (NULL, $1, 'ta', 'erased', 'x')`, []any{w.convB}, "23503"},
				{"a job of another tenant's conversation", `INSERT INTO mneme.jobs (kind, conversation_id, tenant_id, payload)
					VALUES ('noop', $1, 'ta', '{}')`, []any{w.convB}, "23503"},
				{"a message over its limit", `INSERT INTO mneme.messages (conversation_id, tenant_id, role, content)
					VALUES ($1, 'ta', 'user', repeat('x', 200001))`, []any{w.convA}, "22001"},
				{"a blank message", `INSERT INTO mneme.messages (conversation_id, tenant_id, role, content)
					VALUES ($1, 'ta', 'user', E'\u200b ')`, []any{w.convA}, "22023"},
			} {
				_, err := w.db.Pool.Exec(ctx, c.sql, c.args...)
				code := ""
				if p := pgErr(err); p != nil {
					code = p.Code
				}
				assert.Equal(t, c.code, code, "%s: %v", c.name, err)
			}
			require.Equal(t, before, tenantFingerprints(t, w.db)["tb"], "tb's rows are as they were")
		})
	}
}
