package transfer

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// commit ends the worker's conversation in its turn (the conversations
// before it are in): commits it with the lineage links whose target is in
// now, or checks that the tenant's copy holds the file's memories (then it
// was imported before).
func (w *worker) commit() error {
	ctx, cv, turns := w.im.ctx, w.cv, &w.p.turns
	turns.pending = append(turns.pending, cv.links...)
	if cv.mode == "tombstone" {
		_ = cv.tx.Rollback(ctx)
		cv.tx = nil
		turns.erasedConversations++
		return nil
	}
	if cv.mode == "exists" {
		_ = cv.tx.Rollback(ctx)
		cv.tx = nil
		if cv.present != cv.memories {
			return lineErr(cv.line, "conversation %s exists in the tenant but holds %d of the file's %d memories: it was not imported "+
				"from this file (import with --conversations new to give the file's conversations new ids)", cv.id, cv.present, cv.memories)
		}
		turns.skipped++
		return nil
	}
	if len(turns.pending) > 0 {
		if err := w.setLinks(cv.tx); err != nil {
			return fmt.Errorf("conversation %s (line %d): lineage links: %w", cv.id, cv.line, err)
		}
	}
	if err := cv.tx.Commit(ctx); err != nil {
		return w.dbErr(cv.line, cv.line, "conversation", err)
	}
	cv.tx = nil
	turns.conversations++
	if cv.mode == "created" && w.im.o.Embedder != nil && !w.im.res.KeptEmbedding {
		return w.embed(cv.id)
	}
	return nil
}

// setLinks sets the pending lineage links whose target is in now.
func (w *worker) setLinks(tx pgx.Tx) error {
	b, err := json.Marshal(w.p.turns.pending)
	if err != nil {
		return err
	}
	rows, err := tx.Query(w.im.ctx, `SELECT memory_id, link, target FROM mneme.import_links($1::jsonb)`, string(b))
	if err != nil {
		return err
	}
	w.p.turns.pending, err = pgx.CollectRows(rows, pgx.RowToStructByPos[link])
	return err
}

// embed fills the embeddings of a committed conversation's memories (and
// of its episodes' messages, which the segment job embeds too) with the
// external embedder: the model call outside any transaction, each page
// written by its own statements.
func (w *worker) embed(id uuid.UUID) error {
	ctx := w.im.ctx
	var afterMemory *uuid.UUID
	for {
		rows, err := w.conn.Query(ctx, `SELECT memory_id, memory_text FROM mneme.import_unembedded($1, $2, 64)`, id, afterMemory)
		if err != nil {
			return fmt.Errorf("conversation %s: memories to embed: %w", id, err)
		}
		items, err := pgx.CollectRows(rows, pgx.RowToStructByPos[textOf[uuid.UUID]])
		if err != nil {
			return fmt.Errorf("conversation %s: memories to embed: %w", id, err)
		}
		if len(items) == 0 {
			break
		}
		if err := embedPage(w, items, `SELECT mneme.set_embedding($1, $2::real[])`); err != nil {
			return fmt.Errorf("conversation %s: %w", id, err)
		}
		w.p.turns.embedded += int64(len(items))
		afterMemory = &items[len(items)-1].ID
	}
	var afterMessage int64
	for {
		rows, err := w.conn.Query(ctx, `SELECT message_id, content FROM mneme.import_unembedded_messages($1, $2, 64)`, id, afterMessage)
		if err != nil {
			return fmt.Errorf("conversation %s: messages to embed: %w", id, err)
		}
		items, err := pgx.CollectRows(rows, pgx.RowToStructByPos[textOf[int64]])
		if err != nil {
			return fmt.Errorf("conversation %s: messages to embed: %w", id, err)
		}
		if len(items) == 0 {
			return nil
		}
		if err := embedPage(w, items, `SELECT mneme.set_message_embedding($1, $2::real[])`); err != nil {
			return fmt.Errorf("conversation %s: %w", id, err)
		}
		afterMessage = items[len(items)-1].ID
	}
}

// textOf is a row to embed: its id and text.
type textOf[K any] struct {
	ID   K
	Text string
}

// embedPage embeds the texts of a page and stores each vector with store.
func embedPage[K any](w *worker, items []textOf[K], store string) error {
	texts := make([]string, len(items))
	for i, it := range items {
		texts[i] = it.Text
	}
	vecs, err := w.im.o.Embedder.Embed(w.im.ctx, texts)
	if err != nil {
		return fmt.Errorf("embed: %w", err)
	}
	if len(vecs) != len(items) {
		return fmt.Errorf("the embedder returned %d vectors for %d texts", len(vecs), len(items))
	}
	b := &pgx.Batch{}
	for i, it := range items {
		b.Queue(store, it.ID, vecs[i])
	}
	if err := w.conn.SendBatch(w.im.ctx, b).Close(); err != nil {
		return fmt.Errorf("store embeddings: %w", err)
	}
	return nil
}

var keyDetail = regexp.MustCompile(`\(id\)=\(([0-9a-f-]{36})\)`)

// dbErr names the lines a database error came from; an id another row
// holds already names its line and what to do.
func (w *worker) dbErr(first, last int, kind string, err error) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) && pg.Code == "23505" {
		if m := keyDetail.FindStringSubmatch(pg.Detail); m != nil && w.cv != nil {
			if id, perr := uuid.Parse(m[1]); perr == nil {
				if n, ok := w.cv.lineOf[id]; ok {
					first = n
					last = n
				}
			}
		}
		where := fmt.Sprintf("line %d", first)
		if first != last {
			where = fmt.Sprintf("lines %d to %d", first, last)
		}
		detail := ""
		if pg.Detail != "" {
			detail = " (" + pg.Detail + ")"
		}
		return fmt.Errorf("%s: %w: a %s id is held already by another conversation or tenant%s: the ids of the file "+
			"are kept unless --conversations new gives them new ones: %w", where, ErrCollision, kind, detail, err)
	}
	if first == last {
		return &LineError{Line: first, Err: fmt.Errorf("%s: %w", kind, err)}
	}
	return fmt.Errorf("lines %d to %d (%s): %w", first, last, kind, err)
}

// ErrCollision is wrapped by the error of an id another tenant's (or
// conversation's) row holds.
var ErrCollision = errors.New("id collision")
