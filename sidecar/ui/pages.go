package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/client"
)

// tenants lists the tenants for an admin's chooser ("" on error: the page
// still renders, without the chooser).
func (s *Server) tenants(r *http.Request) []string {
	var out []string
	err := pgx.BeginTxFunc(r.Context(), s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		out, err = readTenants(r.Context(), tx)
		return err
	})
	if err != nil {
		s.log.Warn("ui: list tenants", "err", err)
	}
	return out
}

func (s *Server) pageIndex(w http.ResponseWriter, r *http.Request) {
	var convs []Conversation
	err := s.inTx(r.Context(), r, true, func(tx pgx.Tx) error {
		var err error
		if convs, err = readConversations(r.Context(), tx, 500); err != nil {
			return err
		}
		return readTitles(r.Context(), tx, convs)
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "index", page{Title: "Conversations", Data: convs})
}

// msgView is a message as the page shows it, formatted here (a template
// calls a function per field through reflection: 2,000 messages made that
// most of the page's time), with the gap before it.
type msgView struct {
	ID                int64
	Role, Content, At string
	Gap               time.Duration
	SetAsideBy        *int64
}

// episode is a run of messages that went into one memory (or are still
// queued, or were set aside by a failed job).
type episode struct {
	Memory   *MemoryRow
	MemoryID *uuid.UUID
	Queued   bool
	// SetAsideBy is the failed job that set its messages aside.
	SetAsideBy *int64
	Messages   []msgView
}

// session is a run of messages without a session gap (over
// segment_gap_seconds) inside: the conversation's page shows one.
type session struct {
	N          int
	From, To   string
	Gap        time.Duration // before it
	Messages   int
	FirstID    int64
	Episodes   []episode
	HasMessage bool
}

type conversationData struct {
	ID       uuid.UUID
	Sessions []session
	Session  *session // the one shown
	Memories int
	Active   int
	Messages int
	GapLimit time.Duration
	Usage    *ConversationUsage // its model calls (usage.go); nil: none
}

func (s *Server) pageConversation(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		s.fail(w, r, fmt.Errorf("%w: conversation id %q is not a UUID", errBadRequest, r.PathValue("id")))
		return
	}
	q := r.URL.Query()
	n, msg := 1, int64(0)
	if v := q.Get("session"); v != "" {
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			s.fail(w, r, fmt.Errorf("%w: session %q is not a session number (1, 2, ...)", errBadRequest, v))
			return
		}
	}
	if v := q.Get("message"); v != "" {
		if msg, err = strconv.ParseInt(v, 10, 64); err != nil {
			s.fail(w, r, fmt.Errorf("%w: message %q is not a message id", errBadRequest, v))
			return
		}
	}
	d, title, err := s.conversation(r.Context(), r, id, n, msg)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if d.Messages == 0 && d.Memories == 0 {
		s.fail(w, r, fmt.Errorf("%w: conversation %s has no messages or memories this login can see", errNotFound, id))
		return
	}
	if len(d.Sessions) > 0 && d.Session == nil {
		s.fail(w, r, fmt.Errorf("%w: conversation %s has %d sessions, not %d", errNotFound, id, len(d.Sessions), n))
		return
	}
	s.render(w, r, http.StatusOK, "conversation", page{Title: title, Data: d})
}

// conversation reads a conversation, splits it into sessions and groups
// the messages of the one shown (number n, or the one holding message
// msg) by episode: the benchmark's subject with the rendering.
func (s *Server) conversation(ctx context.Context, r *http.Request, id uuid.UUID, n int, msg int64) (conversationData, string, error) {
	d := conversationData{ID: id}
	var msgs []Message
	var mems []MemoryRow
	convs := []Conversation{{ID: id}}
	err := s.inTx(ctx, r, true, func(tx pgx.Tx) error {
		var err error
		if msgs, err = readMessages(ctx, tx, id); err != nil {
			return err
		}
		if mems, err = readMemories(ctx, tx, id, s.now()); err != nil {
			return err
		}
		if err := readTitles(ctx, tx, convs); err != nil {
			return err
		}
		if d.Usage, err = conversationUsage(ctx, tx, id); err != nil {
			return err
		}
		gap, err := settingOf[float64](ctx, tx, "segment_gap_seconds")
		d.GapLimit = time.Duration(gap * float64(time.Second))
		return err
	})
	if err != nil {
		return d, "", err
	}
	d.Messages, d.Memories = len(msgs), len(mems)
	byID := make(map[uuid.UUID]*MemoryRow, len(mems))
	for i := range mems {
		byID[mems[i].ID] = &mems[i]
		if mems[i].Status == "active" {
			d.Active++
		}
	}
	const layout = "2006-01-02 15:04 UTC"
	for i, m := range msgs {
		var gap time.Duration
		if i > 0 {
			gap = m.At.Sub(msgs[i-1].At)
		}
		if i == 0 || gap > d.GapLimit {
			d.Sessions = append(d.Sessions, session{N: len(d.Sessions) + 1, From: m.At.UTC().Format(layout), FirstID: m.ID})
			if i > 0 {
				d.Sessions[len(d.Sessions)-1].Gap = gap
			}
			gap = 0
		}
		ss := &d.Sessions[len(d.Sessions)-1]
		ss.Messages++
		ss.To = m.At.UTC().Format(layout)
		if m.ID == msg {
			ss.HasMessage = true
		}
	}
	for i := range d.Sessions {
		if (msg != 0 && d.Sessions[i].HasMessage) || (msg == 0 && d.Sessions[i].N == n) {
			d.Session = &d.Sessions[i]
		}
	}
	title := convs[0].Title()
	if d.Session == nil {
		return d, title, nil
	}
	// The shown session's messages, grouped by episode.
	ss := d.Session
	start := 0
	for _, p := range d.Sessions[:ss.N-1] {
		start += p.Messages
	}
	for i, m := range msgs[start : start+ss.Messages] {
		v := msgView{ID: m.ID, Role: m.Role, Content: m.Content, At: m.At.UTC().Format(layout), SetAsideBy: m.SetAsideBy}
		if i > 0 {
			v.Gap = m.At.Sub(msgs[start+i-1].At)
			if v.Gap < 10*time.Minute {
				v.Gap = 0 // only the long pauses inside a session are marked
			}
		}
		k := len(ss.Episodes)
		same := k > 0 && ((m.MemoryID == nil && ss.Episodes[k-1].MemoryID == nil && ss.Episodes[k-1].Queued == (m.ConsumedAt == nil)) ||
			(m.MemoryID != nil && ss.Episodes[k-1].MemoryID != nil && *m.MemoryID == *ss.Episodes[k-1].MemoryID))
		if !same {
			e := episode{MemoryID: m.MemoryID, Queued: m.MemoryID == nil && m.ConsumedAt == nil, SetAsideBy: m.SetAsideBy}
			v.Gap = 0
			if m.MemoryID != nil {
				e.Memory = byID[*m.MemoryID]
			}
			ss.Episodes = append(ss.Episodes, e)
			k++
		}
		ss.Episodes[k-1].Messages = append(ss.Episodes[k-1].Messages, v)
	}
	return d, title, nil
}

type searchData struct {
	Conversation  string
	Query         string
	Scope         string
	Budget        int
	Hits          []Hit
	Items         []Item
	Words         int
	Cut           int
	Conversations []Conversation
	Ran           bool
	Note          string // why nothing ran
	CW            float64
}

func (s *Server) pageSearch(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := searchData{Conversation: q.Get("conversation"), Query: q.Get("q"), Scope: q.Get("scope"), Budget: 1000}
	if d.Scope == "" {
		d.Scope = "conversation"
	}
	if b := q.Get("budget"); b != "" {
		n, err := strconv.Atoi(b)
		if err != nil {
			s.fail(w, r, fmt.Errorf("%w: budget %q is not a number of words", errBadRequest, b))
			return
		}
		// To the Go client a zero budget is "not given" (the default); one
		// the URL gives is refused as mneme.context_items refuses it.
		if n == 0 {
			s.fail(w, r, fmt.Errorf("%w: budget must be 1 to 100000 words, got 0", errBadRequest))
			return
		}
		d.Budget = n
	}
	var conv uuid.UUID
	if d.Conversation != "" {
		var err error
		if conv, err = uuid.Parse(d.Conversation); err != nil {
			s.fail(w, r, fmt.Errorf("%w: conversation %q is not a UUID", errBadRequest, d.Conversation))
			return
		}
	}
	ctx := r.Context()
	err := s.inTx(ctx, r, true, func(tx pgx.Tx) error {
		var err error
		// The chooser's list: titles, no counts (mneme.conversations
		// counts every message, memory and job of each).
		if d.Conversations, err = readRecent(ctx, tx, 500); err != nil {
			return err
		}
		// The tenant's scope needs a conversation only to name the
		// tenant: its most recent one.
		if d.Conversation == "" && d.Scope == "tenant" && len(d.Conversations) > 0 {
			conv = d.Conversations[0].ID
			d.Conversation = conv.String()
		}
		switch {
		case strings.TrimSpace(d.Query) == "" && q.Has("q"):
			d.Note = "Type a query."
			return nil
		case strings.TrimSpace(d.Query) == "":
			return nil
		case d.Conversation == "" && len(d.Conversations) == 0:
			d.Note = "This tenant has no conversation to search."
			return nil
		case d.Conversation == "":
			d.Note = "Choose a conversation, or search all the tenant's conversations."
			return nil
		}
		d.Ran = true
		// The candidates the context chooses from (search's top
		// context_candidates) and the items they became: one search.
		if d.Hits, d.Items, err = readContextCandidates(ctx, tx, conv, d.Query, d.Budget, d.Scope); err != nil {
			return err
		}
		if d.CW, err = settingOf[float64](ctx, tx, "confidence_weight"); err != nil {
			return err
		}
		raw, err := settingOf[[]byte](ctx, tx, "label_weights")
		if err != nil {
			return err
		}
		weights := map[string]float64{}
		if err := json.Unmarshal(raw, &weights); err != nil {
			return fmt.Errorf("setting label_weights: %w", err)
		}
		in := map[uuid.UUID]int{}
		for _, it := range d.Items {
			in[it.MemoryID] = it.Item
			d.Words += it.Words
		}
		for i := range d.Hits {
			d.Hits[i].LabelWeight = labelWeight(weights, d.Hits[i].Label)
			d.Hits[i].ConfFactor = math.Pow(math.Min(math.Max(float64(d.Hits[i].Confidence), 1e-6), 1), d.CW)
			d.Hits[i].ContextItem = in[d.Hits[i].ID]
			if d.Hits[i].ContextItem == 0 {
				d.Cut++
			}
		}
		return nil
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "search", page{Title: "Search", Data: d})
}

// labelWeight is mneme._label_key's lookup: the label's own weight,
// "project" for project_*, else "general" (1 when unset).
func labelWeight(w map[string]float64, label string) float64 {
	key := "general"
	if _, ok := w[label]; ok {
		key = label
	} else if strings.HasPrefix(label, "project_") {
		key = "project"
	}
	if v, ok := w[key]; ok {
		return v
	}
	return 1
}

type jobsData struct {
	Stats   []JobStat
	Failed  []FailedJob
	Indexes []VectorIndex // the per-scope HNSW indexes the sidecar keeps
}

func (s *Server) pageJobs(w http.ResponseWriter, r *http.Request) {
	var d jobsData
	if s.jobsReadable {
		err := s.inTx(r.Context(), r, true, func(tx pgx.Tx) error {
			var err error
			if d.Stats, d.Failed, err = readJobs(r.Context(), tx); err != nil {
				return err
			}
			d.Indexes, err = readVectorIndexes(r.Context(), tx)
			return err
		})
		if err != nil {
			s.fail(w, r, err)
			return
		}
	}
	s.render(w, r, http.StatusOK, "jobs", page{Title: "Jobs", Data: d})
}

func (s *Server) postRetryJob(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		s.fail(w, r, fmt.Errorf("%w: job id %q is not a number", errBadRequest, r.PathValue("id")))
		return
	}
	err = s.inTx(r.Context(), r, false, func(tx pgx.Tx) error {
		return client.InTx(tx).RetryJob(r.Context(), id)
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("ui: job retried", "job", id)
	http.Redirect(w, r, href(tenantOf(r), "/jobs"), http.StatusSeeOther)
}
