package tests

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// mneme.tenants() lists the tenants to an unbound admin (a bound login
// sees its own); mneme.drop_tenant erases a tenant whole with
// erase_conversation's tombstones, leaves the others as they were, keeps
// its id from being handed out again, and refuses what it should: a bound
// login (42501), an application login (no privilege), NULL and blank
// arguments, tenant default, an unknown tenant, a tenant with logins
// bound to it (55000, naming them).
func TestTenantsListAndDrop(t *testing.T) {
	t.Parallel()
	testTenantsListAndDrop(t)
}

// TestCitusTenantsListAndDrop is TestTenantsListAndDrop on a distributed
// mneme: the Citus deployment of scripts/test.sh runs it.
func TestCitusTenantsListAndDrop(t *testing.T) {
	if !dbtest.OnCitus() {
		t.Skip("the citus deployment runs it (scripts/test.sh, docs/tests.md)")
	}
	testTenantsListAndDrop(t)
}

func testTenantsListAndDrop(t *testing.T) {
	ctx := context.Background()
	db := dbtest.New(t, dbtest.WithVector("array"))
	admin, _ := db.PoolAs(t, "mneme_admin")
	app, _ := db.PoolAs(t, "mneme_app")
	boundAdmin, boundAdminURL := db.PoolAs(t, "mneme_admin")
	for _, tn := range []string{"acme", "globex"} {
		_, err := admin.Exec(ctx, `SELECT mneme.create_tenant($1)`, tn)
		require.NoError(t, err)
	}
	convs := map[string][]uuid.UUID{"acme": {uuid.New(), uuid.New()}, "globex": {uuid.New()}}
	for tn, cs := range convs {
		for _, c := range cs {
			require.NoError(t, inTenant(t, app, tn, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'The launch code of '||$2||' is plover.')`, c, tn); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, `SELECT mneme.remember($1, 'The launch code of '||$2||' is plover.')`, c, tn)
				return err
			}))
		}
	}
	_, err := admin.Exec(ctx, `SELECT mneme.bind_login($1, 'globex')`, loginOf(t, boundAdminURL))
	require.NoError(t, err)

	type row struct {
		Tenant        string
		Conversations int64
		Logins        []string
	}
	list := func(q interface {
		Query(context.Context, string, ...any) (pgx.Rows, error)
	}) []row {
		t.Helper()
		rows, err := q.Query(ctx, `SELECT tenant, conversations, logins FROM mneme.tenants()`)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
		require.NoError(t, err)
		return out
	}
	require.Equal(t, []row{{"acme", 2, []string{}}, {"default", 0, []string{}}, {"globex", 1, []string{loginOf(t, boundAdminURL)}}}, list(admin))
	require.Equal(t, []row{{"globex", 1, []string{loginOf(t, boundAdminURL)}}}, list(boundAdmin), "a bound login sees its own tenant")
	_, err = app.Exec(ctx, `SELECT * FROM mneme.tenants()`)
	requirePgError(t, err, "42501")

	// Refusals, each before anything changes.
	refused := []struct {
		as           string
		tenant       any
		reason       any
		code, substr string
	}{
		{"app", "acme", "gone", "42501", "permission denied"},
		{"bound", "acme", "gone", "42501", "is bound to tenant globex: it may not drop tenants"},
		{"admin", nil, "gone", "22004", "tenant must not be NULL"},
		{"admin", "acme", nil, "22004", "drop_tenant needs a reason"},
		{"admin", "acme", "  ", "22023", "drop_tenant needs a reason"},
		{"admin", "default", "gone", "22023", "tenant default cannot be dropped"},
		{"admin", "nosuch", "gone", "22023", "unknown tenant"},
		{"admin", "globex", "gone", "55000", "are bound to tenant globex"},
	}
	for _, r := range refused {
		p := admin
		switch r.as {
		case "app":
			p = app
		case "bound":
			p = boundAdmin
		}
		_, err := p.Exec(ctx, `SELECT mneme.drop_tenant($1, $2)`, r.tenant, r.reason)
		pgErr := requirePgError(t, err, r.code)
		require.Contains(t, pgErr.Message, r.substr, "%+v", r)
		if r.code == "22023" || r.code == "55000" || r.as == "bound" {
			require.NotEmpty(t, pgErr.Hint, "%+v says what to do", r)
		}
	}
	require.Len(t, list(admin), 3, "nothing dropped")
	if dbtest.OnCitus() {
		_, err = admin.Exec(ctx, `SELECT mneme.drop_tenant('acme', 'customer left')`)
		pgErr := requirePgError(t, err, "0A000")
		require.Contains(t, pgErr.Message, "does not run on a distributed mneme")
		require.Contains(t, pgErr.Hint, "mneme.erase_conversation")
		return
	}

	var erased int64
	require.NoError(t, admin.QueryRow(ctx, `SELECT mneme.drop_tenant('acme', 'customer left')`).Scan(&erased))
	require.Equal(t, int64(2), erased)
	require.Equal(t, []row{{"default", 0, []string{}}, {"globex", 1, []string{loginOf(t, boundAdminURL)}}}, list(admin))

	// Nothing of acme's is left but its tombstones; globex keeps its own.
	var left, tombstones, globex int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM mneme.memories WHERE tenant_id = 'acme') + (SELECT count(*) FROM mneme.messages WHERE tenant_id = 'acme')
		  + (SELECT count(*) FROM mneme.message_queue WHERE tenant_id = 'acme') + (SELECT count(*) FROM mneme.jobs WHERE tenant_id = 'acme'),
		(SELECT count(*) FROM mneme.memory_events WHERE tenant_id = 'acme' AND event = 'erased' AND reason LIKE '%tenant dropped: customer left'),
		(SELECT count(*) FROM mneme.memories WHERE tenant_id = 'globex')`).Scan(&left, &tombstones, &globex))
	require.Zero(t, left)
	var ev string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT string_agg(format('%s %s %s', memory_id, event, reason), E'\n') FROM mneme.memory_events WHERE tenant_id = 'acme'`).Scan(&ev))
	require.Equal(t, 4, tombstones, "a tombstone per memory and one per conversation:\n%s", ev)
	require.Equal(t, 1, globex)
	var text int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.memory_events WHERE tenant_id = 'acme' AND reason LIKE '%plover%'`).Scan(&text))
	require.Zero(t, text, "no erased text in the tombstones")

	// The id is not handed out again: a new acme would see the old one's tombstones.
	_, err = admin.Exec(ctx, `SELECT mneme.create_tenant('acme')`)
	pgErr := requirePgError(t, err, "22023")
	require.Contains(t, pgErr.Message, "tenant acme was dropped")
	require.Contains(t, pgErr.Hint, "choose another tenant id")
	_, err = app.Exec(ctx, `SELECT mneme.set_tenant('acme')`)
	requirePgError(t, err, "22023")
}

// The HINTs the README promises, where they had none or said the wrong
// thing: a bound login writing to another tenant's conversation is told to
// use one of its own (not to set_tenant, which it cannot); an unbound one
// is told to set_tenant; binding a sidecar login says what to bind
// instead; a missing memory says where it may be.
func TestErrorHints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t, dbtest.WithVector("array"))
	admin, _ := db.PoolAs(t, "mneme_admin")
	_, err := admin.Exec(ctx, `SELECT mneme.create_tenant('acme')`)
	require.NoError(t, err)
	free, _ := db.PoolAs(t, "mneme_app")
	bound, boundURL := db.PoolAs(t, "mneme_app")
	_, err = admin.Exec(ctx, `SELECT mneme.bind_login($1, 'acme')`, loginOf(t, boundURL))
	require.NoError(t, err)
	conv := uuid.New() // tenant default's
	_, err = free.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'hello there, friend')`, conv)
	require.NoError(t, err)

	_, err = bound.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'let me in')`, conv)
	pgErr := requirePgError(t, err, "42501")
	require.Contains(t, pgErr.Message, "belongs to another tenant")
	require.Equal(t, "login "+loginOf(t, boundURL)+" is bound to tenant acme and acts for it only: use a conversation id of that tenant (a new id starts one)", pgErr.Hint)
	require.NotContains(t, pgErr.Hint, "set_tenant")
	err = inTenant(t, free, "acme", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT mneme.add_message($1, 'user', 'let me in')`, conv)
		return err
	})
	pgErr = requirePgError(t, err, "42501")
	require.Contains(t, pgErr.Hint, "SELECT mneme.set_tenant(...)", "an unbound login may choose the tenant")

	worker := loginOf(t, db.As(t, "mneme_worker"))
	_, err = admin.Exec(ctx, `SELECT mneme.bind_login($1, 'acme')`, worker)
	pgErr = requirePgError(t, err, "22023")
	require.Contains(t, pgErr.Message, "is a sidecar login (mneme_worker)")
	require.Contains(t, pgErr.Hint, "CREATE ROLE acme_app LOGIN IN ROLE mneme_app; SELECT mneme.bind_login('acme_app', 'acme')")

	for _, call := range []string{`SELECT * FROM mneme.inspect($1)`, `SELECT mneme.pin($1)`, `SELECT mneme.forget($1, 'x')`,
		`SELECT * FROM mneme.memory_reviews($1)`} {
		_, err = free.Exec(ctx, call, uuid.New())
		pgErr = requirePgError(t, err, "P0002")
		require.Contains(t, pgErr.Hint, "the memory is not in this tenant", call)
		require.Contains(t, pgErr.Hint, "mneme.memory_event_log(id)", call)
	}
}
