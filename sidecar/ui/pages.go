package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
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
		convs, err = readConversations(r.Context(), tx, 500)
		return err
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "index", page{Title: "Conversations", Data: convs})
}

// msgView is a message as the page shows it, formatted here (a template
// calls a function per field through reflection: 2,000 messages made that
// most of the page's time), with the session gap before it.
type msgView struct {
	ID                int64
	Role, Content, At string
	Gap               time.Duration
}

// episode is a run of messages that went into one memory (or are still
// queued, or were set aside by a failed job).
type episode struct {
	Memory   *MemoryRow
	MemoryID *uuid.UUID
	Queued   bool
	// Gap is the session gap before its first message, if any.
	Gap      time.Duration
	Messages []msgView
}

type conversationData struct {
	ID       uuid.UUID
	Episodes []episode
	Memories []MemoryRow
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
	d, err := s.conversation(r.Context(), r, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if d.Messages == 0 && len(d.Memories) == 0 {
		s.fail(w, r, fmt.Errorf("%w: conversation %s has no messages or memories this login can see", errNotFound, id))
		return
	}
	s.render(w, r, http.StatusOK, "conversation", page{Title: "Conversation " + id.String()[:8], Data: d})
}

// conversation reads and groups a conversation's page (the benchmark's
// subject with the rendering).
func (s *Server) conversation(ctx context.Context, r *http.Request, id uuid.UUID) (conversationData, error) {
	d := conversationData{ID: id}
	var msgs []Message
	err := s.inTx(ctx, r, true, func(tx pgx.Tx) error {
		var err error
		if msgs, err = readMessages(ctx, tx, id); err != nil {
			return err
		}
		if d.Memories, err = readMemories(ctx, tx, id, s.now()); err != nil {
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
		return d, err
	}
	d.Messages = len(msgs)
	byID := make(map[uuid.UUID]*MemoryRow, len(d.Memories))
	for i := range d.Memories {
		byID[d.Memories[i].ID] = &d.Memories[i]
	}
	for i, m := range msgs {
		v := msgView{ID: m.ID, Role: m.Role, Content: m.Content, At: m.At.UTC().Format("2006-01-02 15:04:05")}
		if i > 0 && m.At.Sub(msgs[i-1].At) > d.GapLimit {
			v.Gap = m.At.Sub(msgs[i-1].At)
		}
		n := len(d.Episodes)
		same := n > 0 && ((m.MemoryID == nil && d.Episodes[n-1].MemoryID == nil && d.Episodes[n-1].Queued == (m.ConsumedAt == nil)) ||
			(m.MemoryID != nil && d.Episodes[n-1].MemoryID != nil && *m.MemoryID == *d.Episodes[n-1].MemoryID))
		if !same {
			e := episode{MemoryID: m.MemoryID, Queued: m.MemoryID == nil && m.ConsumedAt == nil, Gap: v.Gap}
			v.Gap = 0 // shown between the episodes
			if m.MemoryID != nil {
				e.Memory = byID[*m.MemoryID]
			}
			d.Episodes = append(d.Episodes, e)
			n++
		}
		d.Episodes[n-1].Messages = append(d.Episodes[n-1].Messages, v)
	}
	return d, nil
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
		if d.Conversations, err = readConversations(ctx, tx, 500); err != nil {
			return err
		}
		if d.Conversation == "" || strings.TrimSpace(d.Query) == "" {
			return nil
		}
		d.Ran = true
		// The candidates the context chooses from: search's top
		// context_candidates (at most 100, search's k limit).
		k, err := settingOf[int](ctx, tx, "context_candidates")
		if err != nil {
			return err
		}
		k = max(1, min(k, 100))
		if d.Hits, err = readSearch(ctx, tx, conv, d.Query, k, d.Scope); err != nil {
			return err
		}
		if d.Items, err = readContext(ctx, tx, conv, d.Query, d.Budget, d.Scope); err != nil {
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
	Stats  []JobStat
	Failed []FailedJob
}

func (s *Server) pageJobs(w http.ResponseWriter, r *http.Request) {
	var d jobsData
	if s.jobsReadable {
		err := s.inTx(r.Context(), r, true, func(tx pgx.Tx) error {
			var err error
			d.Stats, d.Failed, err = readJobs(r.Context(), tx)
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
		_, err := tx.Exec(r.Context(), `SELECT mneme.retry_job($1)`, id)
		return err
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("ui: job retried", "job", id)
	http.Redirect(w, r, href(tenantOf(r), "/jobs"), http.StatusSeeOther)
}
