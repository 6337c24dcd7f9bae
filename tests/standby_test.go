package tests

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/cluster"
	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// On a streaming hot standby of the test cluster, after the primary's
// writes have replayed, an application login runs the read-only calls
// (search, context_items, context without recording, history, inspect) and
// gets what the primary gives; every call that records a pending review
// fails at once with 25006 and a hint naming what to call instead, and the
// retrieval the application made on the standby is recorded on the primary
// with mneme.record_retrieval.
func TestReadsOnHotStandby(t *testing.T) {
	t.Parallel()
	primary := dbtest.Cluster(t)
	if primary == nil {
		t.Skip("DATABASE_URL points at an external server: the harness makes standbys of its private cluster only")
	}
	ctx := context.Background()
	e := newPipelineEnv(t, false)
	_, err := e.db.Pool.Exec(ctx, `SELECT mneme.set_setting('segment_shift_similarity', '-1')`)
	require.NoError(t, err)
	e.session(day1, weatherSession)
	e.session(day3, rustSession)
	_, err = e.db.Pool.Exec(ctx, `SELECT mneme.segment_now($1)`, e.conv)
	require.NoError(t, err)
	var paris, berlin uuid.UUID
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'I live in Paris.', 'user_profile')`, e.conv).Scan(&paris))
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, 'I moved to Berlin.', 'user_profile', supersedes => $2)`,
		e.conv, paris).Scan(&berlin))
	e.drain()
	require.GreaterOrEqual(t, len(e.memories()), 4)

	dir, err := os.MkdirTemp("", "mneme-standby-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	standby, err := primary.StartStandby(ctx, filepath.Join(dir, "data"), cluster.Options{Disposable: true})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = standby.Stop(context.Background())
		_ = standby.Remove()
		_ = os.RemoveAll(dir)
	})

	app, appURL := e.db.PoolAs(t, "mneme_app")
	// The login was created after the base backup, after every other write
	// of the test: once the standby has replayed its creation it has
	// replayed everything before it (WAL is replayed in order). Not an LSN
	// read on the primary: the insert position can lie past a page header
	// that no record of a quiet primary ever fills, and the wait then never
	// ends (seen in a full run).
	u, err := url.Parse(appURL)
	require.NoError(t, err)
	u.Host = "127.0.0.1:" + strconv.Itoa(standby.Port)
	superURL, err := url.Parse(e.db.URL)
	require.NoError(t, err)
	superURL.Host = u.Host
	super, err := pgx.Connect(ctx, superURL.String())
	require.NoError(t, err)
	defer super.Close(ctx)
	require.Eventually(t, func() bool {
		var ok bool
		return super.QueryRow(ctx, `SELECT pg_is_in_recovery() AND EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1)`,
			u.User.Username()).Scan(&ok) == nil && ok
	}, 2*time.Minute, 50*time.Millisecond, "the standby replays the primary's writes")
	ro, err := pgxpool.New(ctx, u.String())
	require.NoError(t, err)
	defer ro.Close()

	same := func(q string, args ...any) {
		t.Helper()
		rows := func(p *pgxpool.Pool) []string {
			r, err := p.Query(ctx, `SELECT x::text FROM (`+q+`) x`, args...)
			require.NoError(t, err, q)
			out, err := pgx.CollectRows(r, pgx.RowTo[string])
			require.NoError(t, err, q)
			return out
		}
		want := rows(app)
		require.NotEmpty(t, want, q)
		require.Equal(t, want, rows(ro), "the standby answers as the primary: %s", q)
	}
	same(`SELECT memory_id, content, status FROM mneme.search($1, 'weather Berlin bike ride', 5)`, e.conv)
	same(`SELECT memory_id, content, status FROM mneme.search($1, 'where do I live', 5, include_history => true)`, e.conv)
	same(`SELECT memory_id, content FROM mneme.search($1, 'rust borrow checker', 5, scope => 'tenant')`, e.conv)
	same(`SELECT item, memory_id, text FROM mneme.context_items($1, 'rust ownership lifetimes', 200)`, e.conv)
	same(`SELECT mneme.context($1, 'bike ride by the lake', 200, record => false)`, e.conv)
	same(`SELECT * FROM mneme.history($1)`, berlin)
	same(`SELECT * FROM mneme.inspect($1)`, paris)

	// Recording calls fail at once on the standby, saying what to do.
	for _, q := range []string{
		`SELECT * FROM mneme.retrieve($1, 'weather Berlin', 3)`,
		`SELECT * FROM mneme.retrieve_markdown($1, 'weather Berlin', 3)`,
		`SELECT mneme.context($1, 'weather Berlin', 200)`,
		`SELECT mneme.record_retrieval($1, 'weather Berlin', ARRAY[]::uuid[])`,
	} {
		_, err := ro.Exec(ctx, q, e.conv)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, q)
		require.Equal(t, "25006", pgErr.Code, q)
		require.Contains(t, pgErr.Message, "standby", q)
		require.Contains(t, pgErr.Hint, "mneme.record_retrieval", q)
	}

	// The application's standby read, recorded on the primary, is reviewed
	// like a retrieve.
	r, err := ro.Query(ctx, `SELECT memory_id FROM mneme.search($1, 'rust borrow checker', 2)`, e.conv)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(r, pgx.RowTo[uuid.UUID])
	require.NoError(t, err)
	require.NotEmpty(t, ids)
	_, err = app.Exec(ctx, `SELECT mneme.record_retrieval($1, 'rust borrow checker', $2)`, e.conv, ids)
	require.NoError(t, err)
	var pending []byte
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT pending_reviews FROM mneme.message_queue WHERE id = $1`, e.conv).Scan(&pending))
	require.Contains(t, string(pending), `"query": "rust borrow checker"`)
	require.Contains(t, string(pending), ids[0].String())

	// Bad input to record_retrieval: clear errors, nothing recorded.
	for _, c := range []struct {
		ids  string
		code string
	}{
		{"NULL", "22004"},
		{"ARRAY[NULL]::uuid[]", "22004"},
		{"ARRAY['" + uuid.NewString() + "']::uuid[]", "P0002"},
	} {
		_, err := app.Exec(ctx, `SELECT mneme.record_retrieval($1, 'q', `+c.ids+`)`, e.conv)
		require.Equal(t, c.code, sqlState(t, err), c.ids)
	}
	var after []byte
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT pending_reviews FROM mneme.message_queue WHERE id = $1`, e.conv).Scan(&after))
	require.JSONEq(t, string(pending), string(after))
}
