package ui

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"regexp"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mneme-memory/mneme/client"
)

type memoryData struct {
	Memory  Memory
	Reviews []Review
	Events  []Event
	Lineage []Link
	Plot    template.HTML // server-drawn SVG, every text in it escaped
	Graph   template.HTML
	// Episode is the episode an extracted fact came from (its source_ref).
	Episode *uuid.UUID
	// Sources are its source messages as shown: each a link, or the first
	// and last of a long run.
	Sources []int64
	Elided  int
	Rank    *rankData
}

var episodeRef = regexp.MustCompile(`\bepisode ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b`)

type tombstoneData struct {
	ID     uuid.UUID
	Events []Event
}

func (s *Server) pageMemory(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		s.fail(w, r, fmt.Errorf("%w: memory id %q is not a UUID", errBadRequest, r.PathValue("id")))
		return
	}
	ctx := r.Context()
	now := s.now()
	var d memoryData
	gone := false
	err = s.inTx(ctx, r, true, func(tx pgx.Tx) error {
		var err error
		// The events first: they outlive an erased or purged memory.
		if d.Events, err = readEvents(ctx, tx, id); err != nil {
			return err
		}
		sp, err := tx.Begin(ctx)
		if err != nil {
			return fmt.Errorf("savepoint: %w", err)
		}
		d.Memory, err = readMemory(ctx, sp, id)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "P0002" {
			gone = true
			return sp.Rollback(ctx)
		}
		if err != nil {
			return err
		}
		if err := sp.Commit(ctx); err != nil {
			return fmt.Errorf("release savepoint: %w", err)
		}
		if d.Reviews, err = readReviews(ctx, tx, id); err != nil {
			return err
		}
		if d.Lineage, err = readLineage(ctx, tx, id); err != nil {
			return err
		}
		if q := strings.TrimSpace(r.URL.Query().Get("rank")); q != "" {
			scope := r.URL.Query().Get("scope")
			if scope == "" {
				scope = "conversation"
			}
			d.Rank, err = rankMemory(ctx, tx, d.Memory, q, scope, now)
		}
		return err
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if gone {
		s.render(w, r, http.StatusOK, "tombstone", page{Title: "Memory " + id.String()[:8] + " (gone)", Data: tombstoneData{ID: id, Events: d.Events}})
		return
	}
	m := &d.Memory
	m.Retrievability = retrievability(m.Pinned, m.Stability, m.LastReviewedAt, now)
	if d.Plot, err = retrievabilityPlot(*m, d.Reviews, d.Events, d.Lineage, now); err != nil {
		s.fail(w, r, err)
		return
	}
	d.Graph = lineageGraph(d.Lineage, id, tenantOf(r))
	if m.SourceRef != nil {
		if x := episodeRef.FindStringSubmatch(*m.SourceRef); x != nil {
			if e, err := uuid.Parse(x[1]); err == nil && e != id {
				d.Episode = &e
			}
		}
	}
	d.Sources = m.SourceIDs
	if n := len(d.Sources); n > 12 {
		d.Sources = []int64{m.SourceIDs[0], m.SourceIDs[1], m.SourceIDs[2], m.SourceIDs[n-2], m.SourceIDs[n-1]}
		d.Elided = n - 5
	}
	s.render(w, r, http.StatusOK, "memory", page{Title: "Memory " + id.String()[:8], Now: now, Data: d})
}

// actions are the state changes of a memory, each a call of the SQL API
// (so its checks and privileges apply: erase is mneme_admin's).
var actions = map[string]struct {
	Verb, Explain string
	Reason        bool
}{
	"pin":    {"Pin", "A pinned memory ranks with retrievability 1 and is never inactivated or purged.", false},
	"unpin":  {"Unpin", "The memory fades again with its FSRS stability.", false},
	"forget": {"Forget", "The memory is invalidated with your reason: it leaves retrieval, the row and its lineage stay (mneme.forget).", true},
	"erase":  {"Erase", "The memory's text is removed everywhere it was copied (source messages, facts, recorded retrievals, review queries); a tombstone without content stays (mneme.erase, admins only). This cannot be undone.", true},
}

type confirmData struct {
	Memory  Memory
	Action  string
	Verb    string
	Explain string
	Reason  bool
}

func (s *Server) pageConfirm(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		s.fail(w, r, fmt.Errorf("%w: memory id %q is not a UUID", errBadRequest, r.PathValue("id")))
		return
	}
	a, ok := actions[r.PathValue("action")]
	if !ok {
		s.fail(w, r, fmt.Errorf("%w: no action %q (pin, unpin, forget, erase)", errNotFound, r.PathValue("action")))
		return
	}
	d := confirmData{Action: r.PathValue("action"), Verb: a.Verb, Explain: a.Explain, Reason: a.Reason}
	err = s.inTx(r.Context(), r, true, func(tx pgx.Tx) error {
		var err error
		d.Memory, err = readMemory(r.Context(), tx, id)
		return err
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "confirm", page{Title: a.Verb + " memory " + id.String()[:8] + "?", Data: d})
}

func (s *Server) postMemoryAction(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		s.fail(w, r, fmt.Errorf("%w: memory id %q is not a UUID", errBadRequest, r.PathValue("id")))
		return
	}
	action := r.PathValue("action")
	_, ok := actions[action]
	if !ok {
		s.fail(w, r, fmt.Errorf("%w: no action %q (pin, unpin, forget, erase)", errNotFound, action))
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		s.fail(w, r, fmt.Errorf("%w: %s needs the confirmation (confirm=yes)", errBadRequest, action))
		return
	}
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	err = s.inTx(r.Context(), r, false, func(tx pgx.Tx) error {
		m := client.InTx(tx)
		switch action {
		case "pin":
			return m.Pin(r.Context(), id)
		case "unpin":
			return m.Unpin(r.Context(), id)
		case "forget":
			return m.Forget(r.Context(), id, reason)
		case "erase":
			return m.Erase(r.Context(), id, reason)
		}
		return fmt.Errorf("%w: no action %q", errNotFound, action)
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("ui: memory action", "action", action, "memory", id)
	http.Redirect(w, r, href(tenantOf(r), "/memories/", id), http.StatusSeeOther)
}
