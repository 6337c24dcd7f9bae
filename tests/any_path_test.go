package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/transfer"
	"github.com/mneme-memory/mneme/sidecar/ui"
)

// The invariants hold whatever the path (issue 47): a random sequence of
// steps through every entry point, as five logins (two application logins
// bound to tenants ta and tb, an admin bound to ta, an unbound admin, the
// sidecar's worker): messages, remembered facts, retrievals and context,
// segment_now, the sidecar's jobs, the UI's pages and its pin, unpin,
// forget and erase forms, exports and imports of the admin's own
// files (old ones after an erase, with kept and new ids), crafted import
// calls naming the other tenant's rows or over the limits, mem0 imports of
// the same user into both tenants, settings at their ends, erases of
// memories and conversations. After each step:
// no row references a row of another tenant, no erased memory id and no
// word of an erased conversation is back, no failed job, no text over its
// limit or blank, and cleanup, search and context work in both tenants.
// MNEME_ANY_PATH_STEPS sets the number of steps (default 24 per variant,
// under half a minute); MNEME_TEST_SEED replays a run.
func TestAnyPathKeepsTheInvariants(t *testing.T) {
	t.Parallel()
	steps := 24
	if s, err := strconv.Atoi(os.Getenv("MNEME_ANY_PATH_STEPS")); err == nil && s > 0 {
		steps = s
	}
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			seed := time.Now().UnixNano()
			if s, err := strconv.ParseInt(os.Getenv("MNEME_TEST_SEED"), 10, 64); err == nil {
				seed = s
			}
			t.Logf("seed %d (MNEME_TEST_SEED=%d reproduces this run)", seed, seed)
			rng := rand.New(rand.NewSource(seed))
			runAnyPath(t, variant, rng, steps)
		})
	}
}

type anyPath struct {
	t        *testing.T
	ctx      context.Context
	e        *pipelineEnv
	rng      *rand.Rand
	app      map[string]*pgxpool.Pool
	adminA   *pgxpool.Pool
	adminURL string
	op       *pgxpool.Pool
	opURL    string
	worker   *pgxpool.Pool
	convs    map[string][]uuid.UUID // live conversations per tenant
	words    map[uuid.UUID]string   // each conversation's marker word
	erased   []string               // marker words of conversations erased whole
	files    [][]byte               // exports of ta taken along the way
	ui       *httptest.Server
}

func runAnyPath(t *testing.T, variant string, rng *rand.Rand, steps int) {
	ctx := context.Background()
	e := newPipelineEnv(t, false, dbtest.WithVector(variant))
	p := &anyPath{t: t, ctx: ctx, e: e, rng: rng, app: map[string]*pgxpool.Pool{},
		convs: map[string][]uuid.UUID{}, words: map[uuid.UUID]string{}}
	db := e.db
	for _, tn := range []string{"ta", "tb"} {
		_, err := db.Pool.Exec(ctx, `SELECT mneme.create_tenant($1)`, tn)
		require.NoError(t, err)
		pool, u := db.PoolAs(t, "mneme_app")
		_, err = db.Pool.Exec(ctx, `SELECT mneme.bind_login($1, $2)`, loginOf(t, u), tn)
		require.NoError(t, err)
		p.app[tn] = pool
	}
	p.adminA, p.adminURL = db.PoolAs(t, "mneme_admin")
	_, err := db.Pool.Exec(ctx, `SELECT mneme.bind_login($1, 'ta')`, loginOf(t, p.adminURL))
	require.NoError(t, err)
	p.op, p.opURL = db.PoolAs(t, "mneme_admin")
	p.worker, _ = db.PoolAs(t, "mneme_worker")
	s, err := ui.New(ctx, ui.Options{Pool: p.adminA})
	require.NoError(t, err)
	p.ui = httptest.NewServer(s.Handler())
	t.Cleanup(p.ui.Close)
	for _, tn := range []string{"ta", "tb"} {
		p.newConversation(tn)
	}

	actions := []struct {
		name   string
		weight int
		run    func()
	}{
		{"talk", 6, p.talk},
		{"remember", 3, p.remember},
		{"retrieve", 3, p.retrieve},
		{"segment and run the jobs", 3, p.segmentAndDrain},
		{"export, erase, import the old file", 2, p.exportEraseImport},
		{"crafted import", 2, p.craftedImport},
		{"mem0 import", 1, p.mem0},
		{"setting at an end", 1, p.setting},
		{"erase a conversation", 1, p.eraseConversation},
		{"ui pages", 1, p.uiPages},
		{"ui action", 2, p.uiAction},
	}
	total := 0
	for _, a := range actions {
		total += a.weight
	}
	for i := 0; i < steps; i++ {
		n := rng.Intn(total)
		for _, a := range actions {
			if n < a.weight {
				t.Logf("step %d: %s", i, a.name)
				a.run()
				break
			}
			n -= a.weight
		}
		p.check(fmt.Sprintf("after step %d", i))
	}
	p.segmentAndDrain()
	p.check("at the end")
}

func (p *anyPath) tenant() string { return []string{"ta", "tb"}[p.rng.Intn(2)] }

func (p *anyPath) conv(tn string) uuid.UUID {
	if len(p.convs[tn]) == 0 {
		p.newConversation(tn)
	}
	return p.convs[tn][p.rng.Intn(len(p.convs[tn]))]
}

func (p *anyPath) newConversation(tn string) uuid.UUID {
	c := uuid.New()
	p.convs[tn] = append(p.convs[tn], c)
	p.words[c] = markerWord(p.rng)
	_, err := p.app[tn].Exec(p.ctx, `SELECT mneme.add_message($1, 'user', $2)`, c, "Hello, this is "+p.words[c]+" speaking.")
	require.NoError(p.t, err)
	return c
}

func (p *anyPath) talk() {
	tn := p.tenant()
	c := p.conv(tn)
	for i := 0; i < 1+p.rng.Intn(6); i++ {
		_, err := p.app[tn].Exec(p.ctx, `SELECT mneme.add_message($1, $2, $3)`, c, []string{"user", "assistant"}[i%2],
			fmt.Sprintf("The %s ledger number %d is in drawer %d.", p.words[c], p.rng.Intn(100), p.rng.Intn(9)))
		require.NoError(p.t, err)
	}
}

func (p *anyPath) remember() {
	tn := p.tenant()
	c := p.conv(tn)
	_, err := p.app[tn].Exec(p.ctx, `SELECT mneme.remember($1, $2)`, c,
		fmt.Sprintf("The %s key is under pot %d.", p.words[c], p.rng.Intn(5)))
	require.NoError(p.t, err)
}

func (p *anyPath) retrieve() {
	tn := p.tenant()
	c := p.conv(tn)
	q := []string{`SELECT count(*) FROM mneme.retrieve($1, $2, 5)`, `SELECT length(mneme.context($1, $2, 300))`,
		`SELECT count(*) FROM mneme.retrieve($1, $2, 5, scope => 'tenant')`}[p.rng.Intn(3)]
	var n *int64
	require.NoError(p.t, p.app[tn].QueryRow(p.ctx, q, c, "where is the "+p.words[c]+" ledger").Scan(&n))
}

func (p *anyPath) segmentAndDrain() {
	for _, tn := range []string{"ta", "tb"} {
		for _, c := range p.convs[tn] {
			_, err := p.app[tn].Exec(p.ctx, `SELECT mneme.segment_now($1)`, c)
			require.NoError(p.t, err)
		}
	}
	drainJobs(p.t, p.worker, p.e.deps, p.e.log)
}

// exportEraseImport: the admin of ta exports its tenant, erases a memory
// (or remembers one first), and imports the old file, with its ids or new
// ones: what was erased stays out.
func (p *anyPath) exportEraseImport() {
	file := exportAll(p.t, p.adminURL, transfer.ExportOptions{})
	p.files = append(p.files, file)
	var id *uuid.UUID
	err := p.adminA.QueryRow(p.ctx, `SELECT id FROM mneme.memories ORDER BY md5(id::text || $1) LIMIT 1`,
		strconv.Itoa(p.rng.Int())).Scan(&id)
	if !errors.Is(err, pgx.ErrNoRows) {
		require.NoError(p.t, err)
	}
	if id != nil {
		_, err := p.adminA.Exec(p.ctx, `SELECT mneme.erase($1, 'any-path erase')`, *id)
		require.NoError(p.t, err)
	}
	old := p.files[p.rng.Intn(len(p.files))]
	_, err = importFile(p.t, p.adminURL, old, transfer.ImportOptions{NewIDs: p.rng.Intn(2) == 0})
	if err != nil {
		// a file older than a conversation's later rows: "holds N of the
		// file's memories" is a refusal, not a failure of the invariants
		require.Contains(p.t, err.Error(), "holds", "import of an old file: %v", err)
	}
}

// craftedImport: the admin of ta names tb's rows, or goes over a limit.
func (p *anyPath) craftedImport() {
	var msg int64
	var mem uuid.UUID
	err := p.e.db.Pool.QueryRow(p.ctx, `SELECT (SELECT max(id) FROM mneme.messages WHERE tenant_id = 'tb'),
		(SELECT id FROM mneme.memories WHERE tenant_id = 'tb' LIMIT 1)`).Scan(&msg, &mem)
	if err != nil {
		return // tb has no message or memory yet
	}
	c := p.conv("ta")
	line := fmt.Sprintf(`[{"id": %q, "kind": "semantic", "content": %q, "stability": 10, "difficulty": 5, "surprise": 0,
		"fsrs_state": "review", "last_reviewed_at": "2026-01-01T00:00:00Z", "review_count": 0, "label": "general",
		"pinned": false, "status": "inactive", "confidence_score": 1, "source_type": "import", "source_message_ids": [%d],
		"supersedes_id": %q, "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"}]`,
		uuid.New(), []string{"planted", strings.Repeat("x", 200000), "\u200b"}[p.rng.Intn(3)], msg, mem)
	_, err = p.adminA.Exec(p.ctx, `SELECT mneme.import_memories($1, $2::jsonb)`, c, line)
	require.Error(p.t, err, "a crafted import naming tb's rows or over a limit")
	require.Contains(p.t, []string{"22", "23"}, sqlState(p.t, err)[:2], "%v", err)
}

func (p *anyPath) mem0() {
	file := []byte(`[{"id": "m-` + strconv.Itoa(p.rng.Intn(5)) + `", "memory": "Likes green tea", "user_id": "alex"}]`)
	conn, err := pgx.Connect(p.ctx, p.opURL)
	require.NoError(p.t, err)
	defer conn.Close(p.ctx)
	_, err = transfer.ImportMem0(p.ctx, conn, bytes.NewReader(file), transfer.Mem0Options{Tenant: p.tenant()})
	require.NoError(p.t, err, "the same mem0 user imports into either tenant")
}

func (p *anyPath) setting() {
	c := [][2]string{{"jobs_retention", `"1 second"`}, {"jobs_retention", `"0"`}, {"jobs_retention", `"1 day -24 hours"`},
		{"message_max_chars", `1`}, {"message_max_chars", `10000000`}, {"segment_max_messages", `1`},
		{"inactive_below_r", `0.99`}, {"purge_after_days", `0`}, {"retrievability_weight", `10`},
		{"initial_stability_days", `{"general": 0.01}`}, {"rrf_k", `10000`}}[p.rng.Intn(11)]
	_, err := p.op.Exec(p.ctx, `SELECT mneme.set_setting($1, $2::jsonb)`, c[0], c[1])
	if err != nil {
		require.Equal(p.t, "22023", sqlState(p.t, err), "%s = %s", c[0], c[1])
		return
	}
	p.consumers()
	// back to the default, so later steps write as usual
	_, err = p.e.db.Pool.Exec(p.ctx, `UPDATE mneme.settings s SET value = d.value FROM mneme.settings_defaults d WHERE d.key = s.key AND s.key = $1`, c[0])
	if err != nil {
		_, err = p.op.Exec(p.ctx, `SELECT mneme.set_setting($1, $2::jsonb)`, c[0], map[string]string{
			"jobs_retention": `"7 days"`, "message_max_chars": `100000`, "segment_max_messages": `30`, "inactive_below_r": `0.5`,
			"purge_after_days": `null`, "retrievability_weight": `1`, "rrf_k": `60`,
			"initial_stability_days": `{"general": 900, "project": 900, "trivial": 3, "important": 3650, "temporary": 14, "user_profile": 3650}`,
		}[c[0]])
		require.NoError(p.t, err)
	}
}

func (p *anyPath) eraseConversation() {
	tn := "ta"
	if len(p.convs[tn]) < 2 {
		return
	}
	i := p.rng.Intn(len(p.convs[tn]))
	c := p.convs[tn][i]
	p.files = append(p.files, exportAll(p.t, p.adminURL, transfer.ExportOptions{}))
	_, err := p.adminA.Exec(p.ctx, `SELECT mneme.erase_conversation($1, 'any-path erase')`, c)
	require.NoError(p.t, err)
	p.erased = append(p.erased, p.words[c])
	p.convs[tn] = append(p.convs[tn][:i], p.convs[tn][i+1:]...)
}

func (p *anyPath) uiPages() {
	conv := p.conv("ta")
	var rows int
	require.NoError(p.t, p.adminA.QueryRow(p.ctx, `SELECT (SELECT count(*) FROM mneme.messages WHERE conversation_id = $1)
		+ (SELECT count(*) FROM mneme.memories WHERE conversation_id = $1)`, conv).Scan(&rows))
	for _, path := range []string{"/", "/conversations/" + conv.String(), "/jobs"} {
		res, err := http.Get(p.ui.URL + path)
		require.NoError(p.t, err)
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		want := http.StatusOK
		if strings.HasPrefix(path, "/conversations/") && rows == 0 {
			want = http.StatusNotFound // a conversation with nothing to show (not yet talked in, or erased)
		}
		require.Equal(p.t, want, res.StatusCode, "%s: %s", path, body)
	}
}

// uiAction: the admin of ta pins, unpins, forgets or erases a memory of
// its tenant through the UI's form (the CSRF cookie and field as a
// browser sends them); an erase there is an erase like any other.
func (p *anyPath) uiAction() {
	var id uuid.UUID
	var status string
	err := p.adminA.QueryRow(p.ctx, `SELECT id, status FROM mneme.memories ORDER BY md5(id::text || $1) LIMIT 1`,
		strconv.Itoa(p.rng.Int())).Scan(&id, &status)
	if errors.Is(err, pgx.ErrNoRows) {
		return
	}
	require.NoError(p.t, err)
	jar, err := cookiejar.New(nil)
	require.NoError(p.t, err)
	client := &http.Client{Jar: jar}
	res, err := client.Get(p.ui.URL + "/memories/" + id.String())
	require.NoError(p.t, err)
	res.Body.Close()
	u, _ := url.Parse(p.ui.URL)
	csrf := ""
	for _, c := range jar.Cookies(u) {
		if c.Name == "mneme_ui_csrf" {
			csrf = c.Value
		}
	}
	require.NotEmpty(p.t, csrf, "the UI set its CSRF cookie")
	action := []string{"pin", "unpin", "forget", "erase"}[p.rng.Intn(4)]
	res, err = client.PostForm(p.ui.URL+"/memories/"+id.String()+"/"+action,
		url.Values{"csrf": {csrf}, "confirm": {"yes"}, "reason": {"any-path " + action}})
	require.NoError(p.t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if action == "pin" && status != "active" && status != "inactive" {
		// a belief no longer held is not pinned (mneme.pin, 55000): the
		// UI answers 409 and changes nothing
		require.Equal(p.t, http.StatusConflict, res.StatusCode, "%s of a %s memory: %s", action, status, body)
		return
	}
	require.Less(p.t, res.StatusCode, 400, "%s: %s", action, body)
}

// consumers: cleanup (the operator, every tenant) and each tenant's
// search and context work.
func (p *anyPath) consumers() {
	var n int64
	require.NoError(p.t, p.op.QueryRow(p.ctx, `SELECT count(*) FROM mneme.cleanup()`).Scan(&n), "cleanup")
	for _, tn := range []string{"ta", "tb"} {
		c := p.conv(tn)
		require.NoError(p.t, p.app[tn].QueryRow(p.ctx, `SELECT count(*) FROM mneme.search($1, 'ledger key', 5)`, c).Scan(&n), "search")
		var s string
		require.NoError(p.t, p.app[tn].QueryRow(p.ctx, `SELECT mneme.context($1, 'ledger key', 200)`, c).Scan(&s), "context")
	}
}

// check is the invariants, read as the superuser.
func (p *anyPath) check(when string) {
	t, ctx, db := p.t, p.ctx, p.e.db
	var bad []string
	rows, err := db.Pool.Query(ctx, `
		SELECT 'memory ' || m.id || ' source ' || s FROM mneme.memories m, unnest(m.source_message_ids) s
		JOIN mneme.messages g ON g.id = s WHERE g.tenant_id <> m.tenant_id
		UNION ALL SELECT 'memory ' || m.id || ' link' FROM mneme.memories m JOIN mneme.memories o
		  ON o.id IN (m.supersedes_id, m.confirms_id, m.invalidates_id) WHERE o.tenant_id <> m.tenant_id
		UNION ALL SELECT 'memory ' || m.id || ' conversation' FROM mneme.memories m JOIN mneme.message_queue q
		  ON q.id = m.conversation_id WHERE q.tenant_id <> m.tenant_id
		UNION ALL SELECT 'message ' || g.id || ' episode' FROM mneme.messages g JOIN mneme.memories m ON m.id = g.memory_id
		  WHERE m.tenant_id <> g.tenant_id
		UNION ALL SELECT 'message ' || g.id || ' conversation' FROM mneme.messages g JOIN mneme.message_queue q
		  ON q.id = g.conversation_id WHERE q.tenant_id <> g.tenant_id
		UNION ALL SELECT 'review ' || l.id FROM mneme.review_log l JOIN mneme.memories m ON m.id = l.memory_id
		  WHERE m.tenant_id <> l.tenant_id
		UNION ALL SELECT 'event ' || e.id FROM mneme.memory_events e JOIN mneme.memories m ON m.id = e.memory_id
		  WHERE m.tenant_id <> e.tenant_id
		UNION ALL SELECT 'job ' || j.id FROM mneme.jobs j JOIN mneme.message_queue q ON q.id = j.conversation_id
		  WHERE q.tenant_id <> j.tenant_id
		UNION ALL SELECT 'pending review of ' || q.id FROM mneme.message_queue q,
		  unnest(mneme._named_memories(q.pending_reviews)) n JOIN mneme.memories m ON m.id = n WHERE m.tenant_id <> q.tenant_id
		UNION ALL SELECT 'erased memory back ' || m.id FROM mneme.memories m JOIN mneme.memory_events e
		  ON e.memory_id = m.id AND e.event = 'erased' AND e.tenant_id = m.tenant_id
		UNION ALL SELECT 'failed job ' || j.id || ': ' || coalesce(j.last_error, '') FROM mneme.jobs j WHERE j.state = 'failed'
		UNION ALL SELECT 'blank or long message ' || g.id FROM mneme.messages g
		  WHERE mneme._is_blank(g.content) OR length(g.content) > 10000000
		UNION ALL SELECT 'blank or long memory ' || m.id FROM mneme.memories m
		  WHERE mneme._is_blank(m.content) OR length(m.content) > 1000000000`)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		bad = append(bad, s)
	}
	require.NoError(t, rows.Err())
	require.Empty(t, bad, "%s: invariants broken", when)
	if len(p.erased) > 0 {
		require.Empty(t, markerHits(t, db, p.erased), "%s: a word of an erased conversation is back", when)
	}
	p.consumers()
}
