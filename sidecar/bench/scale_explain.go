package bench

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mneme-memory/mneme/sidecar/clip"
)

// SlowStep is one statement inside a call, from auto_explain: how long it
// took and how it starts.
type SlowStep struct {
	MS    float64 `json:"ms"`
	Query string  `json:"query"`
	Plan  string  `json:"plan"` // the first lines of its plan
}

var autoExplainRE = regexp.MustCompile(`(?s)duration: ([0-9.]+) ms\s+plan:\s*\nQuery Text:(.*?)\n([A-Z].*)`)

// explainCall runs a call ($1 the conversation, $2 three of its words,
// its placeholders filled and its query's vector passed as the run's
// calls are: scaleVectors) as the owner, with auto_explain reporting every
// nested statement: where the call's time goes.
func explainCall(ctx context.Context, dsn string, conv uuid.UUID, vec scaleVectors, call string) ([]SlowStep, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	setup := []string{`LOAD 'auto_explain'`}
	for _, s := range autoExplainSettings {
		setup = append(setup, "SET "+s)
	}
	e, err := newExplainer(ctx, cfg, setup)
	if err != nil {
		return nil, err
	}
	defer e.close()
	var words string
	if err := e.conn.QueryRow(ctx, `SELECT string_agg(w, ' ') FROM (SELECT unnest(string_to_array(s.content, ' ')) AS w
		FROM (SELECT content FROM mneme.memories WHERE conversation_id = $1 ORDER BY id LIMIT 1) s) x WHERE w ~ '^[a-z]+$'`,
		conv).Scan(&words); err != nil {
		return nil, err
	}
	q := strings.Join(strings.Fields(words)[:min(3, len(strings.Fields(words)))], " ")
	sql, args, err := vec.statement(call, conv, q)
	if err != nil {
		return nil, err
	}
	return e.steps(ctx, sql, args...)
}

// explainer is a connection whose statements auto_explain reports as
// notices (its settings made by setup, or the login's own).
type explainer struct {
	conn    *pgx.Conn
	notices []string
}

func newExplainer(ctx context.Context, cfg *pgx.ConnConfig, setup []string) (*explainer, error) {
	e := &explainer{}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { e.notices = append(e.notices, n.Message) }
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	for _, s := range append(setup, `SET client_min_messages = notice`) {
		if _, err := conn.Exec(ctx, s); err != nil {
			conn.Close(context.Background())
			return nil, fmt.Errorf("auto_explain: %w", err)
		}
	}
	e.conn = conn
	return e, nil
}

// steps runs a statement three times, warmed (plans cached, pages read)
// by the first two, and returns the third's statements, slowest first.
func (e *explainer) steps(ctx context.Context, sql string, args ...any) ([]SlowStep, error) {
	for i := 0; i < 3; i++ {
		e.notices = nil
		if _, err := e.conn.Exec(ctx, sql, args...); err != nil {
			return nil, err
		}
	}
	return slowSteps(e.notices), nil
}

func (e *explainer) close() { e.conn.Close(context.Background()) }

// autoExplainSettings make auto_explain report every statement, nested
// ones too, with ANALYZE, as notices.
var autoExplainSettings = []string{"auto_explain.log_min_duration = 0", "auto_explain.log_nested_statements = on",
	"auto_explain.log_analyze = on", "auto_explain.log_level = notice"}

// slowSteps parses auto_explain's notices: the statements, slowest first.
func slowSteps(notices []string) []SlowStep {
	var steps []SlowStep
	for _, n := range notices {
		m := autoExplainRE.FindStringSubmatch(n)
		if m == nil {
			continue
		}
		var ms float64
		fmt.Sscanf(m[1], "%g", &ms)
		query := strings.Join(strings.Fields(m[2]), " ")
		plan := strings.SplitN(m[3], "\n", 4)
		steps = append(steps, SlowStep{MS: ms, Query: clip.String(query, 90), Plan: strings.Join(plan[:min(3, len(plan))], " | ")})
	}
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].MS > steps[j].MS })
	return steps
}
