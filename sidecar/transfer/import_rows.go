package transfer

import (
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/sidecar/embed"
)

// complete checks the counts of the kinds ranked before r.
func (cv *conv) complete(r int) error {
	for _, k := range []struct {
		kind      string
		want, got int64
	}{{kindMessage, cv.want.Messages, cv.got.Messages}, {kindMemory, cv.want.Memories, cv.got.Memories},
		{kindReview, cv.want.Reviews, cv.got.Reviews}, {kindEvent, cv.want.Events, cv.got.Events}} {
		if rank[k.kind] < r && k.want != k.got {
			return lineErr(cv.line, "conversation %s announces %d %s lines, the file has %d (a line lost?): it was not imported",
				cv.fileID, k.want, k.kind, k.got)
		}
	}
	return nil
}

func kindByRank(r int) string {
	for k, v := range rank {
		if v == r {
			return k
		}
	}
	return ""
}

// row validates one row line of the current conversation, translates its
// references (seqs to database ids, remapped ids) and batches it.
func (im *importer) row(n int, kind string, b []byte) error {
	cv := im.cur
	var v any
	var conversation uuid.UUID
	var err error
	switch kind {
	case kindMessage:
		var m messageLine
		if err := decodeStrict(b, &m); err != nil {
			return lineErr(n, "message: %v", err)
		}
		if err := m.validate(); err != nil {
			return lineErr(n, "%v", err)
		}
		cv.nMsg++
		if m.Seq != cv.nMsg {
			return lineErr(n, "message seq %d, expected %d", m.Seq, cv.nMsg)
		}
		m.Episode = im.remapPtr(m.Episode)
		if !im.res.KeptEmbedding {
			m.Embedding = nil
		}
		conversation, v = m.Conversation, m
		im.res.Messages++
	case kindMemory:
		var m memoryLine
		if err := decodeStrict(b, &m); err != nil {
			return lineErr(n, "memory: %v", err)
		}
		if m.SourceMessageIDs != nil {
			return lineErr(n, "memory: unknown field \"source_message_ids\"")
		}
		if m.EmbeddingAt != nil {
			return lineErr(n, "memory: unknown field \"embedding_at\"")
		}
		if err := m.validate(); err != nil {
			return lineErr(n, "%v", err)
		}
		// Messages come first: flush them, so their ids are known.
		if err := im.flushIf(kind); err != nil {
			return err
		}
		for _, s := range m.SourceMessages {
			if s < 1 || s > cv.nMsg {
				return lineErr(n, "source message %d: the conversation has messages 1 to %d", s, cv.nMsg)
			}
			if cv.mode == "created" {
				m.SourceMessageIDs = append(m.SourceMessageIDs, cv.msgIDs[s-1])
			}
		}
		if m.SourceMessages != nil && m.SourceMessageIDs == nil {
			m.SourceMessageIDs = []int64{}
		}
		m.SourceMessages = nil
		m.ID = im.remap(m.ID)
		m.SupersedesID, m.ConfirmsID, m.InvalidatesID = im.remapPtr(m.SupersedesID), im.remapPtr(m.ConfirmsID), im.remapPtr(m.InvalidatesID)
		if err := im.embedding(cv, &m); err != nil {
			return lineErr(n, "%v", err)
		}
		cv.lineOf[m.ID] = n
		cv.memories++
		conversation, v = m.Conversation, m
		im.res.Memories++
	case kindReview:
		var r reviewLine
		if err := decodeStrict(b, &r); err != nil {
			return lineErr(n, "review: %v", err)
		}
		if err := r.validate(); err != nil {
			return lineErr(n, "%v", err)
		}
		cv.nReview++
		if r.Seq != cv.nReview {
			return lineErr(n, "review seq %d, expected %d", r.Seq, cv.nReview)
		}
		r.Memory, r.AskedIn = im.remap(r.Memory), im.remapPtr(r.AskedIn)
		conversation, v = r.Conversation, r
		im.res.Reviews++
	case kindEvent:
		var e eventLine
		if err := decodeStrict(b, &e); err != nil {
			return lineErr(n, "event: %v", err)
		}
		if e.ReviewLogID != nil {
			return lineErr(n, "event: unknown field \"review_log_id\"")
		}
		if err := e.validate(); err != nil {
			return lineErr(n, "%v", err)
		}
		if err := im.flushIf(kind); err != nil {
			return err
		}
		if e.Review != nil {
			if *e.Review < 1 || *e.Review > cv.nReview {
				return lineErr(n, "review %d: the conversation has reviews 1 to %d", *e.Review, cv.nReview)
			}
			if cv.mode == "created" {
				id := cv.reviewIDs[*e.Review-1]
				e.ReviewLogID = &id
			}
			e.Review = nil
		}
		e.Memory = im.remapPtr(e.Memory)
		conversation, v = e.Conversation, e
		im.res.Events++
	}
	if conversation != cv.fileID {
		return lineErr(n, "a line of conversation %s inside conversation %s (line %d)", conversation, cv.fileID, cv.line)
	}
	switch kind {
	case kindMessage:
		cv.got.Messages++
	case kindMemory:
		cv.got.Memories++
	case kindReview:
		cv.got.Reviews++
	case kindEvent:
		cv.got.Events++
	}
	if err := im.flushIf(kind); err != nil {
		return err
	}
	enc, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if cv.nBatch == 0 {
		cv.batch = append(cv.batch[:0], '[')
		cv.first = n
	} else {
		cv.batch = append(cv.batch, ',')
	}
	cv.batch = append(cv.batch, enc...)
	cv.kind = kind
	cv.nBatch++
	if cv.nBatch >= im.o.Batch {
		return im.flush(n)
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
func (im *importer) embedding(cv *conv, m *memoryLine) error {
	var vec []float32
	if im.res.KeptEmbedding && m.Embedding != nil {
		if err := json.Unmarshal(m.Embedding, &vec); err != nil {
			return fmt.Errorf("embedding: %w", err)
		}
	}
	m.Embedding = nil
	if vec == nil && im.hash != nil {
		var err error
		if vec, err = im.hash.EmbedOne(embed.MemoryText(deref(m.Title), deref(m.Summary), m.Content)); err != nil {
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

// flushIf writes the batch when it holds another kind than kind.
func (im *importer) flushIf(kind string) error {
	if im.cur.nBatch > 0 && im.cur.kind != kind {
		return im.flush(-1)
	}
	return nil
}

// flush writes the batch through its import function (or, for a
// conversation the tenant holds already, counts which memories it holds).
func (im *importer) flush(last int) error {
	cv := im.cur
	if cv.nBatch == 0 {
		return nil
	}
	if last < 0 {
		last = cv.first + cv.nBatch - 1 // lines of one kind are contiguous
	}
	batch := string(append(cv.batch, ']'))
	kind := cv.kind
	cv.nBatch = 0
	if cv.mode == "exists" {
		if kind == kindMemory {
			var ids []uuid.UUID
			var ms []memoryLine
			if err := json.Unmarshal([]byte(batch), &ms); err != nil {
				return err
			}
			for _, m := range ms {
				ids = append(ids, m.ID)
			}
			var k int64
			if err := cv.tx.QueryRow(im.ctx, `SELECT mneme.import_present($1, $2)`, cv.id, ids).Scan(&k); err != nil {
				return im.dbErr(cv.first, last, kind, err)
			}
			cv.present += k
			// A link of the conversation imported before to a memory of a
			// later one (an import interrupted in between): set when its
			// target comes in, as in the first run.
			var links []link
			for _, m := range ms {
				for _, l := range []struct {
					name   string
					target *uuid.UUID
				}{{"supersedes_id", m.SupersedesID}, {"confirms_id", m.ConfirmsID}, {"invalidates_id", m.InvalidatesID}} {
					if l.target != nil {
						links = append(links, link{MemoryID: m.ID, Link: l.name, Target: *l.target})
					}
				}
			}
			if len(links) > 0 {
				b, err := json.Marshal(links)
				if err != nil {
					return err
				}
				rows, err := cv.tx.Query(im.ctx, `SELECT memory_id, link, target FROM mneme.import_missing_links($1::jsonb)`, string(b))
				if err != nil {
					return im.dbErr(cv.first, last, kind, err)
				}
				missing, err := pgx.CollectRows(rows, pgx.RowToStructByPos[link])
				if err != nil {
					return im.dbErr(cv.first, last, kind, err)
				}
				im.pending = append(im.pending, missing...)
			}
			clear(cv.lineOf)
		}
		return nil
	}
	switch kind {
	case kindMessage:
		rows, err := cv.tx.Query(im.ctx, `SELECT mneme.import_messages($1, $2::jsonb)`, cv.id, batch)
		if err != nil {
			return im.dbErr(cv.first, last, kind, err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return im.dbErr(cv.first, last, kind, err)
		}
		cv.msgIDs = append(cv.msgIDs, ids...)
	case kindMemory:
		var embs []float32
		if len(cv.embs) > 0 {
			embs = cv.embs
		}
		rows, err := cv.tx.Query(im.ctx, `SELECT memory_id, link, target FROM mneme.import_memories($1, $2::jsonb, $3, $4::real[])`,
			cv.id, batch, im.normalize, embs)
		cv.embs = cv.embs[:0]
		if err != nil {
			return im.dbErr(cv.first, last, kind, err)
		}
		links, err := pgx.CollectRows(rows, pgx.RowToStructByPos[link])
		if err != nil {
			return im.dbErr(cv.first, last, kind, err)
		}
		im.pending = append(im.pending, links...)
		clear(cv.lineOf)
	case kindReview:
		rows, err := cv.tx.Query(im.ctx, `SELECT mneme.import_reviews($1, $2::jsonb)`, cv.id, batch)
		if err != nil {
			return im.dbErr(cv.first, last, kind, err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return im.dbErr(cv.first, last, kind, err)
		}
		cv.reviewIDs = append(cv.reviewIDs, ids...)
	case kindEvent:
		if _, err := cv.tx.Exec(im.ctx, `SELECT mneme.import_events($1, $2::jsonb)`, cv.id, batch); err != nil {
			return im.dbErr(cv.first, last, kind, err)
		}
	}
	return nil
}
