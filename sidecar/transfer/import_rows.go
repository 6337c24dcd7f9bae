package transfer

import (
	"github.com/google/uuid"
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

// row validates one row line of the current conversation, translates the
// references the file alone resolves (remapped ids; seqs are checked here
// and become database ids in the worker) and batches it.
func (im *importer) row(n int, kind string, b []byte, pre any) error {
	cv := im.cur
	var v any
	var conversation uuid.UUID
	var ids []uuid.UUID // the ids the line writes or refers to (see touches)
	switch kind {
	case kindMessage:
		m, ok := pre.(*messageLine)
		if !ok {
			m = &messageLine{}
			if err := decodeStrict(b, m); err != nil {
				return lineErr(n, "message: %v", err)
			}
		}
		if err := m.validate(); err != nil {
			return lineErr(n, "%v", err)
		}
		cv.nMsg++
		if m.Seq != cv.nMsg {
			return lineErr(n, "message seq %d, expected %d", m.Seq, cv.nMsg)
		}
		m.was = m.Episode
		m.Episode = im.remapPtr(m.Episode)
		if !im.res.KeptEmbedding {
			m.Embedding = nil
		}
		conversation, v = m.Conversation, m
		im.res.Messages++
	case kindMemory:
		m, ok := pre.(*memoryLine)
		if !ok {
			m = &memoryLine{}
			if err := decodeStrict(b, m); err != nil {
				return lineErr(n, "memory: %v", err)
			}
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
		im.flushIf(kind)
		for _, s := range m.SourceMessages {
			if s < 1 || s > cv.nMsg {
				return lineErr(n, "source message %d: the conversation has messages 1 to %d", s, cv.nMsg)
			}
		}
		was := m.ID
		m.was = &was
		m.ID = im.remap(m.ID)
		m.SupersedesID, m.ConfirmsID, m.InvalidatesID = im.remapPtr(m.SupersedesID), im.remapPtr(m.ConfirmsID), im.remapPtr(m.InvalidatesID)
		ids = append(ids, m.ID)
		for _, l := range []*uuid.UUID{m.SupersedesID, m.ConfirmsID, m.InvalidatesID} {
			if l != nil {
				ids = append(ids, *l)
			}
		}
		conversation, v = m.Conversation, m
		im.res.Memories++
	case kindReview:
		r, ok := pre.(*reviewLine)
		if !ok {
			r = &reviewLine{}
			if err := decodeStrict(b, r); err != nil {
				return lineErr(n, "review: %v", err)
			}
		}
		if err := r.validate(); err != nil {
			return lineErr(n, "%v", err)
		}
		cv.nReview++
		if r.Seq != cv.nReview {
			return lineErr(n, "review seq %d, expected %d", r.Seq, cv.nReview)
		}
		was := r.Memory
		r.was = &was
		r.Memory, r.AskedIn = im.remap(r.Memory), im.remapPtr(r.AskedIn)
		ids = append(ids, r.Memory)
		conversation, v = r.Conversation, r
		im.res.Reviews++
	case kindEvent:
		e, ok := pre.(*eventLine)
		if !ok {
			e = &eventLine{}
			if err := decodeStrict(b, e); err != nil {
				return lineErr(n, "event: %v", err)
			}
		}
		if e.ReviewLogID != nil {
			return lineErr(n, "event: unknown field \"review_log_id\"")
		}
		if err := e.validate(); err != nil {
			return lineErr(n, "%v", err)
		}
		im.flushIf(kind)
		if e.Review != nil && (*e.Review < 1 || *e.Review > cv.nReview) {
			return lineErr(n, "review %d: the conversation has reviews 1 to %d", *e.Review, cv.nReview)
		}
		e.was = e.Memory
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
	im.flushIf(kind)
	if cv.batch == nil {
		cv.batch = &item{kind: kind, first: n, rows: make([]any, 0, min(im.o.Batch, 1024))}
	}
	cv.batch.rows = append(cv.batch.rows, v)
	cv.batch.last = n
	if im.run.touches(cv.task, ids...) {
		cv.batch.barrier = true
	}
	if len(cv.batch.rows) >= im.o.Batch {
		im.flush()
	}
	return nil
}

// flushIf sends the batch when it holds another kind than kind.
func (im *importer) flushIf(kind string) {
	if b := im.cur.batch; b != nil && b.kind != kind {
		im.flush()
	}
}

// flush sends the batch to the conversation's worker.
func (im *importer) flush() {
	if b := im.cur.batch; b != nil {
		im.cur.batch = nil
		im.run.send(im.cur, *b)
	}
}

// finish ends the current conversation: its last batch and its end go to
// its worker, which commits it in its turn.
func (im *importer) finish() error {
	cv := im.cur
	if cv == nil {
		return nil
	}
	im.flush()
	if err := cv.complete(rank[kindEvent] + 1); err != nil {
		return err
	}
	im.run.send(cv, item{end: true})
	im.cur = nil
	return nil
}
