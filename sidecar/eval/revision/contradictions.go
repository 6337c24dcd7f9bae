package revision

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/eval/recall"
)

// The contradiction suite (issue 52): beliefs that change, stated in other
// words, far apart, in separate episodes, with retractions and reversals
// back. Each case is a conversation of its own: every statement and every
// unrelated filler fact is a user message in a session of its own (days
// apart, so each is its own episode), written through mneme.add_message
// and the sidecar's segmentation, which extracts the facts (the offline
// extractor) and revises them (the revise job). The question then asks
// mneme.search which of the case's facts comes first, before and after
// mneme.consolidate ran on the conversation.

// ContradictionCase is one belief that changes.
type ContradictionCase struct {
	Name       string  `json:"name"`
	Kind       string  `json:"kind"`    // other words, far apart, negation, reversal
	Fillers    int     `json:"fillers"` // unrelated facts between the statements (0: 12)
	Query      string  `json:"query"`
	Current    string  `json:"current"` // the key of the statement that holds the current belief
	Statements []Write `json:"statements"`
}

type contradictionSuite struct {
	Fillers []string            `json:"fillers"`
	Cases   []ContradictionCase `json:"cases"`
}

//go:embed contradictions.json
var contradictionsJSON []byte

// Contradictions is the suite (contradictions.json), a fresh copy each call.
func Contradictions() ([]ContradictionCase, []string) {
	var s contradictionSuite
	if err := json.Unmarshal(contradictionsJSON, &s); err != nil {
		panic(fmt.Sprintf("revision: contradictions.json: %v", err))
	}
	return s.Cases, s.Fillers
}

// ContradictionScore is how often the current belief's fact came first
// among the case's facts that mneme.search returned (k 10), and how often
// a stale one did.
type ContradictionScore struct {
	CurrentFirst float64            `json:"current_first"`
	StaleFirst   float64            `json:"stale_first"`
	ByKind       map[string]float64 `json:"current_first_by_kind"`
	Missed       []string           `json:"missed"`
	first, stale int
	kindN        map[string][2]int
}

// ContradictionReport is the suite's result.
type ContradictionReport struct {
	Cases       int                `json:"cases"`
	Statements  int                `json:"statements"`
	Extracted   int                `json:"extracted"` // statements the segmentation stored as facts
	Before      ContradictionScore `json:"before"`
	After       ContradictionScore `json:"after"`
	Superseded  int                `json:"consolidation_superseded"`
	Invalidated int                `json:"consolidation_invalidated"`
	Merged      int                `json:"consolidation_merged"`
}

// contradictionK is how many results each question reads.
const contradictionK = 10

// RunContradictions writes the contradiction suite into pool and scores it
// before and after consolidation, draining jobs with jobs after each session.
func RunContradictions(ctx context.Context, pool *pgxpool.Pool, jobs recall.Jobs, progress io.Writer) (*ContradictionReport, error) {
	cases, fillers := Contradictions()
	rep := &ContradictionReport{}
	rep.Before.kindN, rep.After.kindN = map[string][2]int{}, map[string][2]int{}
	for ci, c := range cases {
		if err := runContradiction(ctx, pool, jobs, ci, c, fillers, rep); err != nil {
			return nil, fmt.Errorf("contradiction %q: %w", c.Name, err)
		}
		if progress != nil {
			fmt.Fprintf(progress, "contradiction suite: %d/%d (%s)\n", ci+1, len(cases), c.Name)
		}
	}
	for _, s := range []*ContradictionScore{&rep.Before, &rep.After} {
		s.CurrentFirst, s.StaleFirst = ratio(s.first, rep.Cases), ratio(s.stale, rep.Cases)
		s.ByKind = map[string]float64{}
		for k, n := range s.kindN {
			s.ByKind[k] = ratio(n[0], n[1])
		}
	}
	return rep, nil
}

type session struct {
	at   time.Time
	text string
	key  string // the statement's key; "" for a filler
}

func runContradiction(ctx context.Context, pool *pgxpool.Pool, jobs recall.Jobs, ci int, c ContradictionCase, fillers []string,
	rep *ContradictionReport) error {
	conv := uuid.NewSHA1(namespace, []byte("contradiction/"+c.Name))
	n := c.Fillers
	if n == 0 {
		n = 12
	}
	day := func(d float64) time.Time { return Start.Add(time.Duration(d * 24 * float64(time.Hour))) }
	// The fillers spread over the gaps between the statements, and after
	// the last (a question is rarely asked right after the change).
	var ss []session
	gaps := len(c.Statements)
	per := n / gaps
	fi := ci * 7
	for i, st := range c.Statements {
		ss = append(ss, session{at: day(st.Day), text: st.Text, key: st.Key})
		end := st.Day + 20
		if i+1 < len(c.Statements) {
			end = c.Statements[i+1].Day
		}
		k := per
		if i == gaps-1 {
			k = n - per*(gaps-1)
		}
		for j := range k {
			d := st.Day + (end-st.Day)*float64(j+1)/float64(k+1)
			ss = append(ss, session{at: day(d), text: fillers[fi%len(fillers)]})
			fi++
		}
	}
	sort.SliceStable(ss, func(a, b int) bool { return ss[a].at.Before(ss[b].at) })
	for _, s := range ss {
		if _, err := pool.Exec(ctx, `SELECT mneme.add_message($1, 'user', $2, $3)`, conv, s.text, s.at); err != nil {
			return fmt.Errorf("add message: %w", err)
		}
		if _, err := pool.Exec(ctx, `SELECT mneme.add_message($1, 'assistant', 'Noted, thank you for telling me.', $2)`,
			conv, s.at.Add(time.Minute)); err != nil {
			return fmt.Errorf("add message: %w", err)
		}
		if err := jobs.Drain(ctx); err != nil {
			return err
		}
	}
	if _, err := pool.Exec(ctx, `SELECT mneme.segment_now($1)`, conv); err != nil {
		return fmt.Errorf("segment_now: %w", err)
	}
	if err := jobs.Drain(ctx); err != nil {
		return err
	}
	// The case's statements as facts: every fact (any status) whose text
	// holds the statement.
	rows, err := pool.Query(ctx, `SELECT id, content FROM mneme.memories WHERE conversation_id = $1 AND kind = 'semantic'`, conv)
	if err != nil {
		return fmt.Errorf("read facts: %w", err)
	}
	type fact struct {
		ID      uuid.UUID
		Content string
	}
	facts, err := pgx.CollectRows(rows, pgx.RowToStructByPos[fact])
	if err != nil {
		return fmt.Errorf("read facts: %w", err)
	}
	keyOf := map[uuid.UUID]string{}
	for _, st := range c.Statements {
		rep.Statements++
		want := strings.TrimRight(st.Text, ".!")
		found := false
		for _, f := range facts {
			if strings.Contains(f.Content, want) {
				keyOf[f.ID], found = st.Key, true
			}
		}
		if found {
			rep.Extracted++
		}
	}
	rep.Cases++
	last := day(c.Statements[len(c.Statements)-1].Day + 30)
	ask := func(s *ContradictionScore) error {
		rows, err := pool.Query(ctx, `SELECT memory_id FROM mneme.search($1, $2, $3, at => $4)`, conv, c.Query, contradictionK, last)
		if err != nil {
			return fmt.Errorf("search: %w", err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			return fmt.Errorf("search: %w", err)
		}
		first := ""
		for _, id := range got {
			if k, ok := keyOf[id]; ok {
				first = k
				break
			}
		}
		kn := s.kindN[c.Kind]
		kn[1]++
		switch {
		case first == c.Current:
			s.first++
			kn[0]++
		case first != "":
			s.stale++
			s.Missed = append(s.Missed, fmt.Sprintf("%s: %q first (stale)", c.Name, textOf(c, first)))
		default:
			s.Missed = append(s.Missed, fmt.Sprintf("%s: none of its facts in the top %d", c.Name, contradictionK))
		}
		s.kindN[c.Kind] = kn
		return nil
	}
	if err := ask(&rep.Before); err != nil {
		return err
	}
	var job int64
	if err := pool.QueryRow(ctx, `SELECT mneme.consolidate($1)`, conv).Scan(&job); err != nil {
		return fmt.Errorf("consolidate: %w", err)
	}
	if err := jobs.Drain(ctx); err != nil {
		return err
	}
	var res struct {
		Superseded  int `json:"superseded"`
		Invalidated int `json:"invalidated"`
		Merged      int `json:"merged"`
	}
	var raw []byte
	if err := pool.QueryRow(ctx, `SELECT result FROM mneme.jobs WHERE id = $1`, job).Scan(&raw); err != nil {
		return fmt.Errorf("read the consolidation's result: %w", err)
	}
	if raw != nil {
		if err := json.Unmarshal(raw, &res); err != nil {
			return fmt.Errorf("the consolidation's result %s: %w", raw, err)
		}
	}
	rep.Superseded += res.Superseded
	rep.Invalidated += res.Invalidated
	rep.Merged += res.Merged
	return ask(&rep.After)
}

func textOf(c ContradictionCase, key string) string {
	for _, s := range c.Statements {
		if s.Key == key {
			return s.Text
		}
	}
	return key
}

// WriteTable prints the contradiction suite's result.
func (r *ContradictionReport) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "\ncontradiction suite: %d beliefs that change (%d statements, %d stored as facts by segmentation), mneme.search k=%d\n",
		r.Cases, r.Statements, r.Extracted, contradictionK)
	kinds := make([]string, 0, len(r.After.ByKind))
	for k := range r.After.ByKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	fmt.Fprintf(w, "  %-22s %14s %14s\n", "current belief first", "before", "after consolidation")
	fmt.Fprintf(w, "  %-22s %14.3f %14.3f\n", "all", r.Before.CurrentFirst, r.After.CurrentFirst)
	for _, k := range kinds {
		fmt.Fprintf(w, "  %-22s %14.3f %14.3f\n", k, r.Before.ByKind[k], r.After.ByKind[k])
	}
	fmt.Fprintf(w, "  %-22s %14.3f %14.3f\n", "a stale belief first", r.Before.StaleFirst, r.After.StaleFirst)
	fmt.Fprintf(w, "consolidation: superseded %d, invalidated %d, merged %d\n", r.Superseded, r.Invalidated, r.Merged)
	for _, m := range r.After.Missed {
		fmt.Fprintf(w, "  after: %s\n", m)
	}
}
