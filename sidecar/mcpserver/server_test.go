package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/daemon"
	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/jobs"
	"github.com/mneme-memory/mneme/sidecar/pipeline"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// connect serves o over an in-memory transport and returns the client side.
func connect(t *testing.T, o Options) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := New(o).Connect(ctx, st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// call calls a tool; it fails the test on a protocol error and returns the
// structured result (decoded into out when given) and the tool error text.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err, name)
	if res.IsError {
		var texts []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				texts = append(texts, tc.Text)
			}
		}
		return strings.Join(texts, " ")
	}
	if out != nil {
		b, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, out), string(b))
	}
	return ""
}

func appPool(t *testing.T, db *dbtest.DB) *pgxpool.Pool { return rolePool(t, db, "mneme_app") }

// rolePool is a pool of a new login in group (mneme_app, mneme_admin).
func rolePool(t *testing.T, db *dbtest.DB, group string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), db.As(t, group))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// drain runs every ready job (revise, segment, review) with the pipelines
// `mneme run` registers, offline, one at a time: the sidecar in-process.
func drain(t *testing.T, db *dbtest.DB) {
	t.Helper()
	r := jobs.NewRunner(db.Pool, jobs.Options{Concurrency: 1, Lease: 10 * time.Second, PollEvery: 50 * time.Millisecond})
	p, err := pipeline.New(pipeline.Deps{Embedder: embed.NewHash(config.DefaultEmbedDim)})
	require.NoError(t, err)
	require.NoError(t, r.RegisterAll(daemon.Handlers(p, nil)))
	require.NoError(t, r.Drain(context.Background()))
	var failed string
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT coalesce(string_agg(kind || ': ' || last_error, '; '), '')
		FROM mneme.jobs WHERE state = 'failed'`).Scan(&failed))
	require.Empty(t, failed)
}

// pendingRevise counts the revise jobs queued for a memory.
func pendingRevise(t *testing.T, db *dbtest.DB, memoryID string) int {
	t.Helper()
	var n int
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM mneme.jobs
		WHERE kind = 'revise' AND state = 'pending' AND payload->>'memory_id' = $1`, memoryID).Scan(&n))
	return n
}

// TestTools: every tool's happy path through the SDK's client, as an
// application role (mneme_app), and its bad input as a tool error with the
// SQL message and SQLSTATE, never a protocol failure.
func TestTools(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	cs := connect(t, Options{Pool: appPool(t, db), Version: "test"})
	ctx := context.Background()

	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		require.NotEmpty(t, tl.Description, tl.Name)
		require.NotNil(t, tl.InputSchema, tl.Name)
	}
	require.ElementsMatch(t, []string{"add_message", "recall", "search", "remember", "forget", "erase", "pin", "unpin", "inspect", "history"}, names)

	conv := uuid.NewString()
	var msg AddMessageOut
	require.Empty(t, call(t, cs, "add_message", map[string]any{"conversation_id": conv, "role": "user", "content": "I adopted a grey cat called Pixel"}, &msg))
	require.Positive(t, msg.MessageID)
	require.Contains(t, call(t, cs, "add_message", map[string]any{"conversation_id": conv, "role": "assistant",
		"content": "Pixel is a lovely name", "at": "2999-01-01T00:00:00Z"}, nil), "SQLSTATE", "a time far ahead is refused")

	// remember stores the fact and queues its revision; it guesses no
	// action. The revise job (the sidecar's, run here in-process) decides.
	var paris, berlin, again, acme, globex RememberOut
	require.Empty(t, call(t, cs, "remember", map[string]any{"conversation_id": conv, "content": "Alice lives in Paris", "label": "user_profile"}, &paris))
	require.Equal(t, RememberOut{MemoryID: paris.MemoryID, Revision: "queued"}, paris, "no action before the revise job ran")
	require.Equal(t, 1, pendingRevise(t, db, paris.MemoryID))
	drain(t, db)
	require.Empty(t, call(t, cs, "remember", map[string]any{"conversation_id": conv, "content": "Alice moved to Berlin"}, &berlin))
	require.Equal(t, RememberOut{MemoryID: berlin.MemoryID, Revision: "queued"}, berlin)
	require.Equal(t, 1, pendingRevise(t, db, berlin.MemoryID))
	var ins InspectOut
	require.Empty(t, call(t, cs, "inspect", map[string]any{"memory_id": paris.MemoryID}, &ins))
	require.Equal(t, "active", ins.Status, "revision is asynchronous: nothing changed before the job ran")
	drain(t, db)
	require.Zero(t, pendingRevise(t, db, berlin.MemoryID))

	// SUPERSEDE, decided by the revise job: inspect and history show it.
	require.Empty(t, call(t, cs, "inspect", map[string]any{"memory_id": paris.MemoryID}, &ins))
	require.Equal(t, "superseded", ins.Status)
	require.Equal(t, berlin.MemoryID, ins.SupersededBy)
	require.NotNil(t, ins.ValidUntil, "a superseded belief was believed until it was replaced")
	require.Empty(t, call(t, cs, "inspect", map[string]any{"memory_id": berlin.MemoryID}, &ins))
	require.Equal(t, "active", ins.Status)
	require.Equal(t, paris.MemoryID, ins.Supersedes)
	require.Equal(t, "explicit", ins.SourceType)
	require.Contains(t, ins.Slot, "lives_in")
	require.Contains(t, ins.Revision, "SUPERSEDE by heuristic", "inspect says what revision decided")
	confidence := ins.Confidence
	require.Positive(t, confidence)

	// NOOP: a restatement is kept as merged and reconfirms the belief.
	require.Empty(t, call(t, cs, "remember", map[string]any{"conversation_id": conv, "content": "Alice moved to Berlin."}, &again))
	drain(t, db)
	require.Empty(t, call(t, cs, "inspect", map[string]any{"memory_id": again.MemoryID}, &ins))
	require.Equal(t, "merged", ins.Status)
	require.Equal(t, berlin.MemoryID, ins.Confirms)
	require.Empty(t, call(t, cs, "inspect", map[string]any{"memory_id": berlin.MemoryID}, &ins))
	require.Greater(t, ins.Confidence, confidence, "reconfirmed")
	require.NotNil(t, ins.LastConfirmedAt)

	var hist HistoryOut
	require.Empty(t, call(t, cs, "history", map[string]any{"memory_id": berlin.MemoryID}, &hist))
	type link struct {
		Depth              int
		Relation, MemoryID string
		Status, Supersedes string
	}
	var links []link
	for _, h := range hist.Lineage {
		links = append(links, link{h.Depth, h.Relation, h.MemoryID, h.Status, h.Supersedes})
		require.Equal(t, "explicit", h.SourceType)
		require.Positive(t, h.Confidence)
	}
	require.Equal(t, []link{
		{-1, "replaced", paris.MemoryID, "superseded", ""},
		{0, "self", berlin.MemoryID, "active", paris.MemoryID},
		{0, "confirmed_by", again.MemoryID, "merged", ""},
	}, links)
	require.NotNil(t, hist.Lineage[0].ValidUntil)

	// An explicit supersedes is the caller's decision, applied at once
	// (no revise job).
	require.Empty(t, call(t, cs, "remember", map[string]any{"conversation_id": conv, "content": "Alice works at Acme"}, &acme))
	drain(t, db)
	require.Empty(t, call(t, cs, "remember", map[string]any{"conversation_id": conv, "content": "Alice works at Globex",
		"supersedes": acme.MemoryID}, &globex))
	require.Equal(t, RememberOut{MemoryID: globex.MemoryID, Revision: "applied", Action: "SUPERSEDE", Supersedes: acme.MemoryID}, globex)
	require.Zero(t, pendingRevise(t, db, globex.MemoryID))
	require.Empty(t, call(t, cs, "inspect", map[string]any{"memory_id": acme.MemoryID}, &ins))
	require.Equal(t, "superseded", ins.Status)
	require.Equal(t, globex.MemoryID, ins.SupersededBy)

	var found SearchOut
	require.Empty(t, call(t, cs, "search", map[string]any{"conversation_id": conv, "query": "where did Alice move to", "k": 3}, &found))
	require.NotEmpty(t, found.Memories)
	require.Equal(t, berlin.MemoryID, found.Memories[0].MemoryID, "the current belief, not the superseded one: %+v", found.Memories)
	for _, m := range found.Memories {
		require.NotContains(t, []string{paris.MemoryID, again.MemoryID}, m.MemoryID, "superseded and merged rows are not retrieved")
	}

	// recall records the pending review the sidecar's review job rates later.
	var rec RecallOut
	require.Empty(t, call(t, cs, "recall", map[string]any{"conversation_id": conv, "query": "where did Alice move to"}, &rec))
	require.Contains(t, rec.Context, "Alice moved to Berlin")
	require.NotContains(t, rec.Context, "Paris")
	var pending []byte
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT mneme.take_pending_reviews($1)`, conv).Scan(&pending))
	var reviews []struct {
		Query     string   `json:"query"`
		MemoryIDs []string `json:"memory_ids"`
	}
	require.NoError(t, json.Unmarshal(pending, &reviews), string(pending))
	require.Len(t, reviews, 1, "search records nothing, recall one review: %s", pending)
	require.Equal(t, "where did Alice move to", reviews[0].Query)
	require.Contains(t, reviews[0].MemoryIDs, berlin.MemoryID)

	var done Done
	require.Empty(t, call(t, cs, "pin", map[string]any{"memory_id": berlin.MemoryID}, &done))
	require.True(t, done.OK)
	require.Empty(t, call(t, cs, "inspect", map[string]any{"memory_id": berlin.MemoryID}, &ins))
	require.True(t, ins.Pinned)
	require.Empty(t, call(t, cs, "unpin", map[string]any{"memory_id": berlin.MemoryID}, nil))
	require.Empty(t, call(t, cs, "forget", map[string]any{"memory_id": berlin.MemoryID, "reason": "the user retracted it"}, nil))
	require.Empty(t, call(t, cs, "inspect", map[string]any{"memory_id": berlin.MemoryID}, &ins))
	require.Equal(t, "invalidated", ins.Status)
	require.Contains(t, call(t, cs, "erase", map[string]any{"memory_id": berlin.MemoryID, "reason": "user request"}, nil),
		"SQLSTATE 42501", "erase needs mneme_admin; the application role has not")

	// erase through an operator's connection: the content is gone, a
	// tombstone with the reason stays.
	admin := connect(t, Options{Pool: rolePool(t, db, "mneme_admin"), Version: "test"})
	require.Contains(t, call(t, admin, "erase", map[string]any{"memory_id": berlin.MemoryID, "reason": " "}, nil),
		"hint: the reason stays in the tombstone", "the SQL hint reaches the tool error")
	require.Empty(t, call(t, admin, "erase", map[string]any{"memory_id": berlin.MemoryID, "reason": "user request"}, &done))
	require.True(t, done.OK)
	var tombstones, rows int // two statements: Citus refuses a subquery over another distributed table in the target list
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE event = 'erased' AND reason = 'user request')
		FROM mneme.memory_events WHERE memory_id = $1`, berlin.MemoryID).Scan(&tombstones))
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.memories WHERE id = $1`, berlin.MemoryID).Scan(&rows))
	require.Equal(t, 1, tombstones)
	require.Zero(t, rows)
	require.Contains(t, call(t, cs, "inspect", map[string]any{"memory_id": berlin.MemoryID}, nil), "P0002")

	// Bad input: tool errors naming the problem.
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"add_message", map[string]any{"conversation_id": "not-a-uuid", "role": "user", "content": "x"}, "22P02"},
		{"add_message", map[string]any{"conversation_id": conv, "role": "user", "content": "   "}, "22023"},
		{"add_message", map[string]any{"conversation_id": conv, "role": "robot", "content": "hi"}, "set_speakers"},
		{"add_message", map[string]any{"conversation_id": conv, "role": "user"}, "content"},
		{"recall", map[string]any{"conversation_id": conv, "query": "x", "budget": -3}, "budget must be 1 to"},
		{"recall", map[string]any{"conversation_id": conv, "query": "x", "budget": -3}, "(SQLSTATE 22023); hint: the budget is the most words"},
		{"recall", map[string]any{"conversation_id": conv, "query": "x", "scope": "galaxy"}, "scope must be"},
		{"search", map[string]any{"conversation_id": conv, "query": "x", "k": 1000}, "22023"},
		{"remember", map[string]any{"conversation_id": conv, "content": "x", "label": "nonsense"}, "22023"},
		{"forget", map[string]any{"memory_id": uuid.NewString(), "reason": "gone"}, "P0002"},
		{"inspect", map[string]any{"memory_id": "x"}, "22P02"},
		{"inspect", map[string]any{"memory_id": uuid.NewString()}, "P0002"},
		{"history", map[string]any{"memory_id": uuid.NewString()}, "P0002"},
		{"pin", map[string]any{"memory_id": uuid.NewString()}, "P0002"},
		{"unpin", map[string]any{"memory_id": "nope"}, "22P02"},
		{"forget", map[string]any{"memory_id": paris.MemoryID, "reason": "  "}, "22023"},
		{"remember", map[string]any{"conversation_id": conv, "content": "x", "supersedes": uuid.NewString()}, "P0002"},
		{"search", map[string]any{"conversation_id": conv}, "query"},
		{"recall", map[string]any{"query": "x"}, "conversation_id"},
	} {
		got := call(t, cs, c.tool, c.args, nil)
		require.Contains(t, got, c.want, "%s %v", c.tool, c.args)
	}
}

// TestHTTPTenants: over streamable HTTP, each bearer token's tenant sees
// its own memories only; no token or a wrong one is 401; concurrent
// clients lose no message.
func TestHTTPTenants(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	for _, tn := range []string{"acme", "globex"} {
		_, err := db.Pool.Exec(ctx, `SELECT mneme.create_tenant($1)`, tn)
		require.NoError(t, err)
	}
	tokA, lineA, err := NewToken("acme")
	require.NoError(t, err)
	tokG, lineG, err := NewToken("globex")
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(file, []byte("# tenants\n"+lineA+"\n"+lineG+"\n"), 0o600))
	require.NotContains(t, lineA+lineG, tokA, "the file holds hashes only")
	tr, err := ParseTransport("http", "", file)
	require.NoError(t, err)
	srv := httptest.NewServer(HTTPHandler(New(Options{Pool: appPool(t, db)}), tr.Tokens))
	t.Cleanup(srv.Close)

	client := func(token string) *mcp.ClientSession {
		hc := &http.Client{Transport: bearer{token: token}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: hc}, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	acme, globex := client(tokA), client(tokG)
	conv := uuid.NewString()
	require.Empty(t, call(t, acme, "remember", map[string]any{"conversation_id": conv, "content": "the vault code is 4711"}, nil))
	var found SearchOut
	require.Empty(t, call(t, acme, "search", map[string]any{"conversation_id": conv, "query": "vault code"}, &found))
	require.Len(t, found.Memories, 1)
	require.Empty(t, call(t, globex, "search", map[string]any{"conversation_id": conv, "query": "vault code"}, &found))
	require.Empty(t, found.Memories, "another tenant's conversation shows nothing")
	require.Contains(t, call(t, globex, "add_message", map[string]any{"conversation_id": conv, "role": "user", "content": "hi"}, nil), "42501")

	for _, tok := range []string{"", "mneme_wrong", tokA + "x"} {
		req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "token %q", tok)
	}

	// Bounded load: 8 clients x 25 messages each on one conversation.
	conv2 := uuid.NewString()
	var wg sync.WaitGroup
	errs := make(chan string, 200)
	for c := 0; c < 8; c++ {
		cs := client(tokA)
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add_message", Arguments: map[string]any{
					"conversation_id": conv2, "role": "user", "content": fmt.Sprintf("client %d message %d", c, i)}})
				if err != nil || res.IsError {
					errs <- fmt.Sprint(err, res)
				}
			}
		}(c)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.messages WHERE conversation_id = $1 AND tenant_id = 'acme'`, conv2).Scan(&n))
	require.Equal(t, 200, n)
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func TestTokensFile(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	require.NoError(t, os.WriteFile(bad, []byte("acme not-a-hash\n"), 0o600))
	_, err := LoadTokens(bad)
	require.ErrorContains(t, err, "line 1")
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte("# nothing\n"), 0o600))
	_, err = LoadTokens(empty)
	require.ErrorContains(t, err, "holds no token")
	_, err = ParseTransport("http", "", "")
	require.ErrorContains(t, err, "needs --tokens")
	_, err = ParseTransport("carrier-pigeon", "", "")
	require.ErrorContains(t, err, "want stdio or http")
	_, _, err = NewToken("Not A Tenant")
	require.Error(t, err)
}

// TestStdioTenant: a server configured with a tenant (stdio's --tenant)
// writes that tenant's rows; an unknown tenant is a tool error.
func TestStdioTenant(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `SELECT mneme.create_tenant('acme')`)
	require.NoError(t, err)
	pool := appPool(t, db)
	conv := uuid.NewString()
	require.Empty(t, call(t, connect(t, Options{Pool: pool, Tenant: "acme"}), "add_message",
		map[string]any{"conversation_id": conv, "role": "user", "content": "hello"}, nil))
	var tenant string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT tenant_id FROM mneme.message_queue WHERE id = $1`, conv).Scan(&tenant))
	require.Equal(t, "acme", tenant)
	require.Contains(t, call(t, connect(t, Options{Pool: pool, Tenant: "nobody"}), "add_message",
		map[string]any{"conversation_id": conv, "role": "user", "content": "hello"}, nil), "unknown tenant")
}
