package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/client"
	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func pool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

// requireState fails unless err is a *client.Error with SQLSTATE state.
func requireState(t *testing.T, err error, state string) *client.Error {
	t.Helper()
	var me *client.Error
	require.ErrorAs(t, err, &me)
	require.Equal(t, state, me.SQLState, me.Error())
	return me
}

// Every function of the client against a real mneme as a mneme_app login
// of tenant acme (erase as a mneme_admin one), in both vector variants
// and through PgBouncer 1.18 in transaction pooling (pgx's exec mode).
func TestClient(t *testing.T) {
	t.Parallel()
	for _, variant := range dbtest.Variants(t) {
		t.Run(variant, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := dbtest.New(t, dbtest.WithVector(variant))
			_, err := db.Pool.Exec(ctx, `SELECT mneme.create_tenant('acme')`)
			require.NoError(t, err)
			appURL, adminURL := db.As(t, "mneme_app"), db.As(t, "mneme_admin")
			bouncer := dbtest.PgBouncer(t, login(t, appURL), login(t, adminURL))
			for _, via := range []string{"direct", "pgbouncer"} {
				t.Run(via, func(t *testing.T) {
					app, admin := appURL, adminURL
					if via == "pgbouncer" {
						app, err = bouncer.URL(appURL)
						require.NoError(t, err)
						admin, err = bouncer.URL(adminURL)
						require.NoError(t, err)
						app += "&default_query_exec_mode=exec"
						admin += "&default_query_exec_mode=exec"
					}
					everyFunction(t, pool(t, app), pool(t, admin))
				})
			}
		})
	}
}

func login(t *testing.T, url string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	return cfg.User
}

func everyFunction(t *testing.T, app, adminPool *pgxpool.Pool) {
	ctx := context.Background()
	c, err := client.Connect(ctx, app)
	require.NoError(t, err)
	m := c.WithTenant("acme")
	require.Equal(t, "acme", m.Tenant())
	v, err := m.Version(ctx)
	require.NoError(t, err)
	require.Equal(t, "1.0.0", v)

	conv := uuid.New()
	var ids []int64
	for _, msg := range [][2]string{{"user", "Hi, I am planning a trip to see Alice."}, {"assistant", "Where does she live these days?"}} {
		id, err := m.AddMessage(ctx, conv, msg[0], msg[1])
		require.NoError(t, err)
		ids = append(ids, id)
	}
	id, err := m.AddMessageAt(ctx, conv, "user", "She moved to Lisbon last spring.", time.Now())
	require.NoError(t, err)
	ids = append(ids, id)
	msgs, err := m.Messages(ctx, conv)
	require.NoError(t, err)
	require.Len(t, msgs, 3)
	for i, msg := range msgs {
		require.Equal(t, ids[i], msg.MessageID)
		require.Nil(t, msg.MemoryID)
	}
	require.Equal(t, "She moved to Lisbon last spring.", msgs[2].Content)
	// PopMessage takes back the latest message and returns it; added again, it is the same.
	popped, err := m.PopMessage(ctx, conv)
	require.NoError(t, err)
	require.Equal(t, client.PoppedMessage{MessageID: ids[2], Role: "user", Content: "She moved to Lisbon last spring.",
		CreatedAt: msgs[2].CreatedAt}, *popped)
	ids[2], err = m.AddMessage(ctx, conv, "user", "She moved to Lisbon last spring.")
	require.NoError(t, err)
	popped, err = m.PopMessage(ctx, uuid.New())
	require.NoError(t, err)
	require.Nil(t, popped, "an unknown conversation pops nothing")

	mem, err := m.Remember(ctx, conv, "Alice lives in Lisbon", client.RememberOptions{Label: "user_profile", Title: "alice-home"})
	require.NoError(t, err)
	hits, err := m.Search(ctx, conv, "where does Alice live?", client.SearchOptions{})
	require.NoError(t, err)
	require.Len(t, hits, 1)
	require.Equal(t, mem, hits[0].MemoryID)
	require.Equal(t, []string{"Alice lives in Lisbon", "user_profile", "alice-home", "semantic", "active"},
		[]string{hits[0].Content, hits[0].Label, hits[0].Title, hits[0].Kind, hits[0].Status})
	require.NotNil(t, hits[0].BM25Rank)

	emb, err := m.HashEmbed(ctx, "where does Alice live?")
	require.NoError(t, err)
	require.Len(t, emb, 256)
	got, err := m.Retrieve(ctx, conv, "where does Alice live?", client.SearchOptions{K: 3, QueryEmbedding: emb, Scope: "conversation"})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, int32(1), *got[0].VectorRank)

	text, err := m.Context(ctx, conv, "where does Alice live?", client.ContextOptions{Budget: 200})
	require.NoError(t, err)
	require.Equal(t, "- Alice lives in Lisbon", text)
	text, err = m.Context(ctx, conv, "where does Alice live?", client.ContextOptions{Budget: 200, NoRecord: true})
	require.NoError(t, err)
	require.Equal(t, "- Alice lives in Lisbon", text)
	items, err := m.ContextItems(ctx, conv, "where does Alice live?", client.ContextOptions{Budget: 200})
	require.NoError(t, err)
	require.Len(t, items, 1)
	require.Equal(t, mem, items[0].MemoryID)

	require.NoError(t, m.Pin(ctx, mem))
	ins, err := m.Inspect(ctx, mem)
	require.NoError(t, err)
	require.True(t, ins.Pinned)
	require.NoError(t, m.Unpin(ctx, mem))
	ins, err = m.Inspect(ctx, mem)
	require.NoError(t, err)
	require.False(t, ins.Pinned)
	require.Equal(t, conv, ins.ConversationID)
	require.Equal(t, "explicit", ins.SourceType)

	newer, err := m.Remember(ctx, conv, "Alice lives in Porto", client.RememberOptions{Supersedes: mem, At: time.Now()})
	require.NoError(t, err)
	hist, err := m.History(ctx, newer)
	require.NoError(t, err)
	statuses := map[uuid.UUID]string{}
	for _, h := range hist {
		statuses[h.MemoryID] = h.Status
	}
	require.Equal(t, map[uuid.UUID]string{mem: "superseded", newer: "active"}, statuses)
	require.NoError(t, m.Forget(ctx, newer, "the user said it was wrong"))
	ins, err = m.Inspect(ctx, newer)
	require.NoError(t, err)
	require.Equal(t, []string{"invalidated", "the user said it was wrong"}, []string{ins.Status, ins.StatusReason})
	mems, err := m.Memories(ctx, conv)
	require.NoError(t, err)
	require.Len(t, mems, 2)
	convs, err := m.Conversations(ctx, 1000)
	require.NoError(t, err)
	var found bool
	for _, cv := range convs {
		found = found || cv.ConversationID == conv && cv.Messages == 3 && cv.Memories == 2
	}
	require.True(t, found, "%+v", convs)
	job, err := m.SegmentNow(ctx, conv)
	require.NoError(t, err)
	require.Positive(t, job)
	job, err = m.SegmentNow(ctx, uuid.New())
	require.NoError(t, err)
	require.Zero(t, job, "nothing queued")

	// Bad input: *client.Error with SQLSTATE, message and hint, and the
	// server's *pgconn.PgError beneath.
	_, err = m.Context(ctx, conv, "x", client.ContextOptions{Budget: -1})
	me := requireState(t, err, "22023")
	require.Equal(t, "context", me.Op)
	require.Contains(t, me.Message, "budget must be 1 to 100000 words")
	require.Contains(t, me.Hint, "the budget is the most words")
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	_, err = m.AddMessage(ctx, conv, "robot", "hi")
	requireState(t, err, "22023")
	_, err = m.AddMessage(ctx, conv, "user", " ")
	requireState(t, err, "22023")
	_, err = m.Remember(ctx, conv, "x", client.RememberOptions{Label: "nonsense"})
	requireState(t, err, "22023")
	_, err = m.Inspect(ctx, uuid.New())
	requireState(t, err, "P0002")
	requireState(t, m.SetTenant(ctx, "acme"), "25P01")
	_, err = c.WithTenant("nobody").Search(ctx, conv, "x", client.SearchOptions{})
	requireState(t, err, "22023")
	_, err = client.ParseID("memory_id", "nope")
	require.Equal(t, "22P02", client.SQLState(err))
	// A failed Tx rolls back what it wrote before the error.
	err = m.Tx(ctx, func(tx *client.Client) error {
		if _, err := tx.AddMessage(ctx, conv, "user", "rolled back"); err != nil {
			return err
		}
		_, err := tx.Context(ctx, conv, "x", client.ContextOptions{Budget: -1})
		return err
	})
	requireState(t, err, "22023")
	msgs, err = m.Messages(ctx, conv)
	require.NoError(t, err)
	require.Len(t, msgs, 3)

	// Tenants: the default tenant does not see acme's conversation; SetTenant
	// inside a Tx switches.
	hits, err = c.Search(ctx, conv, "Alice", client.SearchOptions{})
	require.NoError(t, err)
	require.Empty(t, hits)
	require.NoError(t, c.Tx(ctx, func(tx *client.Client) error {
		if err := tx.SetTenant(ctx, "acme"); err != nil {
			return err
		}
		hits, err = tx.Search(ctx, conv, "Alice", client.SearchOptions{IncludeHistory: true})
		return err
	}))
	require.Len(t, hits, 2)

	// erase is mneme_admin's.
	requireState(t, m.Erase(ctx, mem, "right to be forgotten"), "42501")
	admin := client.New(adminPool).WithTenant("acme")
	require.NoError(t, admin.Erase(ctx, mem, "right to be forgotten"))
	_, err = m.Inspect(ctx, mem)
	requireState(t, err, "P0002")
	n, err := admin.EraseConversation(ctx, conv, "account closed")
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	msgs, err = m.Messages(ctx, conv)
	require.NoError(t, err)
	require.Empty(t, msgs)
}

// Connect refuses a database without mneme.version() (not migrated) and
// one whose SQL API major is not 1, with ErrUnsupportedVersion.
func TestConnectChecksVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, empty := dbtest.NewEmpty(t)
	_, err := client.Connect(ctx, pool(t, empty))
	require.ErrorIs(t, err, client.ErrUnsupportedVersion)
	require.ErrorContains(t, err, "the database is not migrated or its mneme is too old")
	require.ErrorContains(t, err, "run `mneme migrate`")

	_, v2 := dbtest.NewEmpty(t)
	p := pool(t, v2)
	_, err = p.Exec(ctx, `CREATE SCHEMA mneme; CREATE FUNCTION mneme.version() RETURNS text LANGUAGE sql AS $$SELECT '2.0.0'$$`)
	require.NoError(t, err)
	_, err = client.Connect(ctx, p)
	require.ErrorIs(t, err, client.ErrUnsupportedVersion)
	require.EqualError(t, err, "unsupported mneme SQL API version: mneme SQL API 2.0.0 is not supported by this client (supports >=1.0.0 <2.0.0): upgrade github.com/mneme-memory/mneme/client")
	_, err = p.Exec(ctx, `CREATE OR REPLACE FUNCTION mneme.version() RETURNS text LANGUAGE sql AS $$SELECT '1.4.2'$$`)
	require.NoError(t, err)
	_, err = client.Connect(ctx, p)
	require.NoError(t, err, "a newer minor only adds")
}

// Open makes its own pool, checks the version as Connect does and runs
// as the tenant it was given; Close closes the pool (twice is safe).
func TestOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, empty := dbtest.NewEmpty(t)
	_, err := client.Open(ctx, empty, "")
	require.ErrorIs(t, err, client.ErrUnsupportedVersion)
	_, err = client.Open(ctx, "postgres://nobody@127.0.0.1:1/x?connect_timeout=1&pool_max_conns=-5", "")
	require.Error(t, err, "a bad URL is refused")

	db := dbtest.New(t)
	_, err = db.Pool.Exec(ctx, `SELECT mneme.create_tenant('acme')`)
	require.NoError(t, err)
	m, err := client.Open(ctx, db.As(t, "mneme_app"), "acme")
	require.NoError(t, err)
	require.Equal(t, "acme", m.Tenant())
	conv := uuid.New()
	_, err = m.AddMessage(ctx, conv, "user", "hello from Open")
	require.NoError(t, err)
	var tenant string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT tenant_id FROM mneme.message_queue WHERE id = $1`, conv).Scan(&tenant))
	require.Equal(t, "acme", tenant)
	raw, err := m.Setting(ctx, "rrf_k")
	require.NoError(t, err)
	require.JSONEq(t, "60", string(raw))
	_, err = m.Setting(ctx, "no_such_setting")
	require.Error(t, err)
	titles, err := m.RecentConversations(ctx, 0)
	require.NoError(t, err)
	require.Len(t, titles, 1)
	require.Equal(t, conv, titles[0].ConversationID)
	require.Equal(t, "hello from Open", titles[0].FirstMessage)
	require.Equal(t, []string{"user"}, titles[0].Speakers)
	named, err := m.ConversationTitles(ctx, []uuid.UUID{conv, uuid.New()})
	require.NoError(t, err)
	require.Len(t, named, 1)
	require.Equal(t, titles[0].FirstMessage, named[0].FirstMessage)
	m.Close()
	m.Close()
	_, err = m.AddMessage(ctx, conv, "user", "after Close")
	require.Error(t, err, "the pool is closed")
	require.Panics(t, func() { client.Must(m.AddMessage(ctx, conv, "user", "after Close")) })
}

// The reads for people and the UI's calls, as a mneme_admin login of
// tenant acme: a memory's reviews (with their evidence) and events,
// find_memories with filters, the labels, the BM25 leg, the LLM usage
// reads and retry_job of a failed job.
func TestReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	_, err := db.Pool.Exec(ctx, `SELECT mneme.create_tenant('acme')`)
	require.NoError(t, err)
	m := client.New(pool(t, db.As(t, "mneme_admin"))).WithTenant("acme")
	conv := uuid.New()
	_, err = m.AddMessage(ctx, conv, "user", "I keep bees on the roof.")
	require.NoError(t, err)
	bees, err := m.Remember(ctx, conv, "The user keeps bees on the roof.", client.RememberOptions{Label: "user_profile"})
	require.NoError(t, err)
	tea, err := m.Remember(ctx, conv, "The user drinks green tea.", client.RememberOptions{})
	require.NoError(t, err)
	require.NoError(t, m.Forget(ctx, tea, "not true any more"))
	_, err = db.Pool.Exec(ctx, `SELECT mneme.apply_review($1, 'good', 400, 5, 'review', now(), 'heuristic', ARRAY['bees'],
		evidence => '{"score": 0.2, "thresholds": {"hard": 0.04, "good": 0.09, "easy": 0.25}}')`, bees)
	require.NoError(t, err)

	reviews, err := m.MemoryReviews(ctx, bees)
	require.NoError(t, err)
	require.Len(t, reviews, 1)
	require.Equal(t, "good", reviews[0].Rating)
	require.Equal(t, []string{"bees"}, reviews[0].MatchedQueries)
	require.JSONEq(t, `{"score": 0.2, "thresholds": {"hard": 0.04, "good": 0.09, "easy": 0.25}}`, string(reviews[0].Evidence))
	events, err := m.MemoryEvents(ctx, tea)
	require.NoError(t, err)
	require.Equal(t, "forgotten", events[len(events)-1].Event)

	found, err := m.FindMemories(ctx, client.FindOptions{Words: "BEES"})
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.Equal(t, bees, found[0].MemoryID)
	require.EqualValues(t, 1, found[0].Total)
	no := false
	found, err = m.FindMemories(ctx, client.FindOptions{Conversation: conv, Status: "invalidated", Pinned: &no, Sort: "r"})
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.Equal(t, tea, found[0].MemoryID)
	_, err = m.FindMemories(ctx, client.FindOptions{Sort: "sideways"})
	requireState(t, err, "22023")
	zero := 0
	_, err = m.FindMemories(ctx, client.FindOptions{Page: &zero})
	requireState(t, err, "22023")

	labels, err := m.Labels(ctx)
	require.NoError(t, err)
	require.Contains(t, labels, "user_profile")
	hits, err := m.BM25Search(ctx, conv, "bees", 10)
	require.NoError(t, err)
	require.Len(t, hits, 1)
	require.Equal(t, bees, hits[0].MemoryID)
	require.EqualValues(t, 1, hits[0].Rank)

	usage, err := m.LLMUsage(ctx, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), "kind")
	require.NoError(t, err)
	require.Empty(t, usage, "no model call")
	cu, err := m.ConversationLLMUsage(ctx, conv)
	require.NoError(t, err)
	require.Zero(t, cu.Calls)

	var job int64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.enqueue_job('noop', $1)`, conv).Scan(&job))
	_, err = db.Pool.Exec(ctx, `UPDATE mneme.jobs SET state = 'failed', last_error = 'a test' WHERE id = $1`, job)
	require.NoError(t, err)
	require.NoError(t, m.RetryJob(ctx, job))
	var state string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT state FROM mneme.jobs WHERE id = $1`, job).Scan(&state))
	require.Equal(t, "pending", state)
	requireState(t, m.RetryJob(ctx, job), "55000")
}
