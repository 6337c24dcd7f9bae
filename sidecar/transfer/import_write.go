package transfer

import (
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/sidecar/embed"
)

// worker writes conversations on its connection (import_worker.go).
type worker struct {
	p    *pipeline
	im   *importer
	conn *pgx.Conn
	hash *embed.Hash
	cv   *wconv
	buf  []byte
}

// wconv is the conversation a worker writes.
type wconv struct {
	id        uuid.UUID
	line      int
	mode      string // created, exists, erased; tombstone: the tenant erased it, left out
	tx        pgx.Tx
	msgIDs    []int64 // database id of message seq i+1
	reviewIDs []int64
	memories  int64 // the file's
	present   int64 // exists: how many of them the conversation holds
	lineOf    map[uuid.UUID]int
	embs      []float32 // the memory batch's embeddings, dim each (memoryLine.EmbeddingAt)
	kept      []bool    // the batch's rows written (false: left out, erased in the tenant)
	links     []link    // lineage links whose target was not in
}

// begin opens the conversation's transaction.
func (w *worker) begin(it item) error {
	ctx := w.im.ctx
	cv := &wconv{id: it.conv, line: it.first, lineOf: map[uuid.UUID]int{}}
	w.cv = cv
	tx, err := w.conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin conversation %s: %w", cv.id, err)
	}
	cv.tx = tx
	if t := w.im.o.Tenant; t != "" {
		if _, err := tx.Exec(ctx, `SELECT mneme.set_tenant($1)`, t); err != nil {
			return fmt.Errorf("set tenant %s: %w", t, err)
		}
	}
	// Erase is final: a conversation the tenant erased (its id in the file,
	// or the one it is given) stays out, saying so.
	if !it.erased {
		gone, err := w.tombstones(tx, []uuid.UUID{it.was, it.conv})
		if err != nil {
			return w.dbErr(it.first, it.first, "conversation", err)
		}
		if len(gone) > 0 {
			cv.mode = "tombstone"
			w.im.o.Log.Warn("import: conversation left out: the tenant erased it (erase is final)", "conversation", it.was, "line", it.first)
			return nil
		}
		if len(it.reviewsWas) > 0 {
			if it.begin, err = w.withoutErasedReviews(tx, it); err != nil {
				return lineErr(it.first, "pending_reviews: %v", err)
			}
		}
	}
	if err := tx.QueryRow(ctx, `SELECT mneme.import_conversation($1::jsonb)`, string(it.begin)).Scan(&cv.mode); err != nil {
		return w.dbErr(it.first, it.first, "conversation", err)
	}
	return nil
}

// tombstones are the ids of ids the tenant erased (mneme.import_tombstones).
func (w *worker) tombstones(tx pgx.Tx, ids []uuid.UUID) (map[uuid.UUID]bool, error) {
	rows, err := tx.Query(w.im.ctx, `SELECT mneme.import_tombstones($1)`, ids)
	if err != nil {
		return nil, err
	}
	gone, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, err
	}
	m := make(map[uuid.UUID]bool, len(gone))
	for _, id := range gone {
		m[id] = true
	}
	return m, nil
}

// wasOf is the file's id of the memory a row is or belongs to (nil: none).
func wasOf(r any) *uuid.UUID {
	switch v := r.(type) {
	case *messageLine:
		return v.was
	case *memoryLine:
		return v.was
	case *reviewLine:
		return v.was
	case *eventLine:
		return v.was
	}
	return nil
}

// flush turns a batch's seqs into database ids, computes its embeddings,
// and writes it through its import function (or, for a conversation the
// tenant holds already, counts which memories it holds).
func (w *worker) flush(it item) error {
	cv := w.cv
	if cv.mode == "tombstone" {
		w.p.turns.erasedRows += int64(len(it.rows))
		return nil
	}
	created := cv.mode == "created"
	// Erase is final: the rows of a memory the tenant erased (the memory,
	// its episode's messages, its reviews and events) stay out; a message
	// or review left out keeps its place (id 0), so seqs still resolve.
	var gone map[uuid.UUID]bool
	if !it.dry && cv.mode != "erased" {
		var was []uuid.UUID
		for _, r := range it.rows {
			if id := wasOf(r); id != nil {
				was = append(was, *id)
			}
		}
		if len(was) > 0 {
			var err error
			if gone, err = w.tombstones(cv.tx, was); err != nil {
				return w.dbErr(it.first, it.last, it.kind, err)
			}
		}
	}
	cv.kept = cv.kept[:0]
	w.buf = append(w.buf[:0], '[')
	wrote := 0
	for i, r := range it.rows {
		n := it.first + i
		if id := wasOf(r); id != nil && gone[*id] {
			cv.kept = append(cv.kept, false)
			if created {
				w.p.turns.erasedRows++
			} else if _, ok := r.(*memoryLine); ok {
				cv.present++ // imported before, erased since: as good as held
				cv.memories++
				w.p.turns.erasedRows++
			}
			continue
		}
		cv.kept = append(cv.kept, true)
		switch v := r.(type) {
		case *memoryLine:
			if created {
				for _, s := range v.SourceMessages {
					if id := cv.msgIDs[s-1]; id != 0 {
						v.SourceMessageIDs = append(v.SourceMessageIDs, id)
					}
				}
			}
			if v.SourceMessages != nil && v.SourceMessageIDs == nil {
				v.SourceMessageIDs = []int64{}
			}
			v.SourceMessages = nil
			if err := w.embedding(v); err != nil {
				return lineErr(n, "%v", err)
			}
			cv.lineOf[v.ID] = n
			cv.memories++
		case *eventLine:
			if v.Review != nil {
				if created {
					if id := cv.reviewIDs[*v.Review-1]; id != 0 {
						v.ReviewLogID = &id
					}
				}
				v.Review = nil
			}
		}
		if wrote > 0 {
			w.buf = append(w.buf, ',')
		}
		wrote++
		var err error
		if w.buf, err = appendJSON(w.buf, r); err != nil {
			return lineErr(n, "%v", err)
		}
	}
	w.buf = append(w.buf, ']')
	if it.dry {
		cv.embs = cv.embs[:0]
		return nil
	}
	return w.store(it)
}

// appendJSON appends v's JSON to b.
func appendJSON(b []byte, v any) ([]byte, error) {
	enc, err := json.Marshal(v)
	return append(b, enc...), err
}

func (w *worker) store(it item) error {
	ctx, cv, kind := w.im.ctx, w.cv, it.kind
	batch := string(w.buf)
	if cv.mode == "exists" {
		if kind != kindMemory {
			return nil
		}
		ids := make([]uuid.UUID, 0, len(it.rows))
		var links []link
		for i, r := range it.rows {
			if !cv.kept[i] {
				continue
			}
			m := r.(*memoryLine)
			ids = append(ids, m.ID)
			// A link of the conversation imported before to a memory of a
			// later one (an import interrupted in between): set when its
			// target comes in, as in the first run.
			for _, l := range []struct {
				name   string
				target *uuid.UUID
			}{{"supersedes_id", m.SupersedesID}, {"confirms_id", m.ConfirmsID}, {"invalidates_id", m.InvalidatesID}} {
				if l.target != nil {
					links = append(links, link{MemoryID: m.ID, Link: l.name, Target: *l.target})
				}
			}
		}
		cv.embs = cv.embs[:0]
		var k int64
		if err := cv.tx.QueryRow(ctx, `SELECT mneme.import_present($1, $2)`, cv.id, ids).Scan(&k); err != nil {
			return w.dbErr(it.first, it.last, kind, err)
		}
		cv.present += k
		if len(links) > 0 {
			b, err := json.Marshal(links)
			if err != nil {
				return err
			}
			rows, err := cv.tx.Query(ctx, `SELECT memory_id, link, target FROM mneme.import_missing_links($1::jsonb)`, string(b))
			if err != nil {
				return w.dbErr(it.first, it.last, kind, err)
			}
			missing, err := pgx.CollectRows(rows, pgx.RowToStructByPos[link])
			if err != nil {
				return w.dbErr(it.first, it.last, kind, err)
			}
			cv.links = append(cv.links, missing...)
		}
		clear(cv.lineOf)
		return nil
	}
	switch kind {
	case kindMessage:
		rows, err := cv.tx.Query(ctx, `SELECT mneme.import_messages($1, $2::jsonb)`, cv.id, batch)
		if err != nil {
			return w.dbErr(it.first, it.last, kind, err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return w.dbErr(it.first, it.last, kind, err)
		}
		cv.msgIDs = cv.placed(cv.msgIDs, ids)
	case kindMemory:
		var embs []float32
		if len(cv.embs) > 0 {
			embs = cv.embs
		}
		rows, err := cv.tx.Query(ctx, `SELECT memory_id, link, target FROM mneme.import_memories($1, $2::jsonb, $3, $4::real[])`,
			cv.id, batch, w.im.normalize, embs)
		cv.embs = cv.embs[:0]
		if err != nil {
			return w.dbErr(it.first, it.last, kind, err)
		}
		links, err := pgx.CollectRows(rows, pgx.RowToStructByPos[link])
		if err != nil {
			return w.dbErr(it.first, it.last, kind, err)
		}
		cv.links = append(cv.links, links...)
		clear(cv.lineOf)
	case kindReview:
		rows, err := cv.tx.Query(ctx, `SELECT mneme.import_reviews($1, $2::jsonb)`, cv.id, batch)
		if err != nil {
			return w.dbErr(it.first, it.last, kind, err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return w.dbErr(it.first, it.last, kind, err)
		}
		cv.reviewIDs = cv.placed(cv.reviewIDs, ids)
	case kindEvent:
		if _, err := cv.tx.Exec(ctx, `SELECT mneme.import_events($1, $2::jsonb)`, cv.id, batch); err != nil {
			return w.dbErr(it.first, it.last, kind, err)
		}
	}
	return nil
}

// embedding moves a memory's embedding into the batch's binary array
// (parsing floats out of JSON text was a fifth of the server's time per
// memory): the file's, when kept, else the built-in embedder's, computed
// here (the hash trigger's PL/pgSQL per row was most of an import), also
// for a line of a file with embeddings that has none. The array variant's
// are normalised as its trigger would store them (mneme.import_memories
// with normalized => true). With an external embedder and no embedding in
// the file the memory has none until its conversation is committed.
func (w *worker) embedding(m *memoryLine) error {
	cv, im := w.cv, w.im
	var vec []float32
	if im.res.KeptEmbedding && m.Embedding != nil {
		if err := json.Unmarshal(m.Embedding, &vec); err != nil {
			return fmt.Errorf("embedding: %w", err)
		}
	}
	m.Embedding = nil
	if vec == nil && w.hash != nil {
		var err error
		if vec, err = w.hash.EmbedOne(embed.MemoryText(deref(m.Title), deref(m.Summary), m.Content)); err != nil {
			return fmt.Errorf("embed: %w", err)
		}
	}
	if vec == nil {
		return nil
	}
	if len(vec) != im.dim {
		return fmt.Errorf("embedding of %d dimensions, the database's have %d", len(vec), im.dim)
	}
	if im.normalize {
		vec = l2Normalized(vec)
	}
	cv.embs = append(cv.embs, vec...)
	at := len(cv.embs) / im.dim
	m.EmbeddingAt = &at
	return nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// placed appends the database ids of a batch's rows to dst in the batch's
// order: ids for the rows written, 0 for the rows left out.
func (cv *wconv) placed(dst, ids []int64) []int64 {
	k := 0
	for _, kept := range cv.kept {
		if kept && k < len(ids) {
			dst = append(dst, ids[k])
			k++
		} else {
			dst = append(dst, 0)
		}
	}
	return dst
}

// withoutErasedReviews drops from the conversation line the pending
// reviews that name a memory the tenant erased (by the file's ids): their
// query asked about it, and erase took such queries out.
func (w *worker) withoutErasedReviews(tx pgx.Tx, it item) ([]byte, error) {
	var was []struct {
		MemoryIDs []uuid.UUID `json:"memory_ids"`
	}
	if err := json.Unmarshal(it.reviewsWas, &was); err != nil {
		return nil, err
	}
	var ids []uuid.UUID
	for _, e := range was {
		ids = append(ids, e.MemoryIDs...)
	}
	gone, err := w.tombstones(tx, ids)
	if err != nil || len(gone) == 0 {
		return it.begin, err
	}
	var line map[string]json.RawMessage
	if err := json.Unmarshal(it.begin, &line); err != nil {
		return nil, err
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(line["pending_reviews"], &entries); err != nil {
		return nil, err
	}
	kept := entries[:0]
	for i, e := range entries {
		erased := false
		for _, id := range was[i].MemoryIDs {
			erased = erased || gone[id]
		}
		if erased {
			w.p.turns.erasedRows++
			continue
		}
		kept = append(kept, e)
	}
	if len(kept) == 0 {
		delete(line, "pending_reviews")
	} else if line["pending_reviews"], err = json.Marshal(kept); err != nil {
		return nil, err
	}
	return json.Marshal(line)
}
