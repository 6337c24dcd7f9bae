package transfer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mneme-memory/mneme/sidecar/embed"
)

// Embedder computes embeddings (the configured external embedder); the
// importer calls it between transactions, never inside one.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// ImportOptions says how to import.
type ImportOptions struct {
	Tenant string // "" = the session's; created when missing
	// NewIDs gives the file's conversations and memories new ids (derived
	// from Seed and the old id, so a resumed import with the same Seed
	// finds what it wrote), so one file can be imported twice.
	NewIDs   bool
	Seed     uuid.UUID // with NewIDs; uuid.Nil = a random one (Result.Seed)
	Settings bool      // apply the file's settings through mneme.set_setting
	// Embedder is the configured external embedder, nil for the built-in
	// one (SQL embeds); Model names it, as export headers do.
	Embedder Embedder
	Model    string
	Batch    int // lines per statement (default 1000)
	Progress *Progress
}

// Result is what an import did.
type Result struct {
	Stats
	Seed          uuid.UUID // the remapping seed (NewIDs)
	Embedded      int64     // memories embedded by the external embedder
	DroppedLinks  int64     // lineage links to memories not in the file nor the database
	KeptEmbedding bool      // the file's embeddings were used
}

type link struct {
	MemoryID uuid.UUID `json:"memory_id"`
	Link     string    `json:"link"`
	Target   uuid.UUID `json:"target"`
}

// conv is the conversation being imported.
type conv struct {
	fileID    uuid.UUID
	id        uuid.UUID
	line      int
	mode      string // created, exists, erased
	tx        pgx.Tx
	rank      int
	msgIDs    []int64 // database id of message seq i+1
	reviewIDs []int64
	nMsg      int64
	nReview   int64
	memories  int64 // the file's
	want      lineCounts
	got       lineCounts
	present   int64 // exists: how many of them the conversation holds
	batch     []byte
	kind      string
	first     int // line of the batch's first line
	lineOf    map[uuid.UUID]int
	nBatch    int
}

type importer struct {
	ctx      context.Context
	conn     *pgx.Conn
	hash     *embed.Hash // the target embeds with the built-in embedder: computed here
	o        ImportOptions
	res      Result
	header   Header
	settings []settingAt
	applied  bool
	cur      *conv
	pending  []link
	lines    int64 // lines between header and end
}

type settingAt struct {
	line int
	s    settingLine
}

// Import reads an export file from r into the database: each conversation
// in one transaction, written through the import functions of
// sql/460-export.sql, its rows and events as they were. A conversation the
// tenant holds already with the file's memories is skipped, so an
// interrupted import resumes by running it again; a bad line stops the
// import with an error naming it, and its conversation is left as it was.
func Import(ctx context.Context, conn *pgx.Conn, r io.Reader, o ImportOptions) (Result, error) {
	if o.Batch <= 0 {
		o.Batch = 1000
	}
	im := &importer{ctx: ctx, conn: conn, o: o}
	if o.NewIDs {
		im.res.Seed = o.Seed
		if im.res.Seed == uuid.Nil {
			im.res.Seed = uuid.New()
		}
	}
	err := im.run(r)
	if im.cur != nil && im.cur.tx != nil {
		_ = im.cur.tx.Rollback(ctx)
	}
	o.Progress.Done(im.res.Memories, im.res.Lines)
	return im.res, err
}

func (im *importer) remap(id uuid.UUID) uuid.UUID {
	if !im.o.NewIDs || id == uuid.Nil {
		return id
	}
	return uuid.NewSHA1(im.res.Seed, id[:])
}

func (im *importer) remapPtr(id *uuid.UUID) *uuid.UUID {
	if id == nil {
		return nil
	}
	v := im.remap(*id)
	return &v
}

func (im *importer) run(r io.Reader) error {
	rd, err := newReader(r)
	if err != nil {
		return err
	}
	first, err := rd.next()
	if errors.Is(err, io.EOF) {
		return lineErr(1, "the file is empty")
	}
	if err != nil {
		return err
	}
	if err := im.start(first); err != nil {
		return err
	}
	ended := false
	for {
		b, err := rd.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		n := rd.n
		im.res.Lines++
		if ended {
			return lineErr(n, "a line after the end line")
		}
		kind, err := lineType(b)
		if err != nil {
			return lineErr(n, "%v", err)
		}
		if kind == kindEnd {
			var e endLine
			if err := decodeStrict(b, &e); err != nil {
				return lineErr(n, "end: %v", err)
			}
			// Checked before the last conversation commits: a line lost
			// from it leaves it out.
			convs := im.res.Conversations + im.res.Skipped
			if im.cur != nil {
				convs++
			}
			if e.Lines != im.lines || e.Conversations != convs {
				return lineErr(n, "the end line counts %d lines and %d conversations, the file has %d and %d",
					e.Lines, e.Conversations, im.lines, convs)
			}
			if err := im.applySettings(); err != nil {
				return err
			}
			if err := im.finish(); err != nil {
				return err
			}
			ended = true
			continue
		}
		im.lines++
		if err := im.line(n, kind, b); err != nil {
			return err
		}
		im.o.Progress.Set(im.res.Memories, im.res.Lines)
	}
	if !ended {
		return lineErr(rd.n+1, "the file ends without its end line (truncated?): the conversation it ends in was not imported")
	}
	return im.dropLinks()
}

// start reads the header and learns the target's embedding model.
func (im *importer) start(b []byte) error {
	if err := decodeStrict(b, &im.header); err != nil {
		return lineErr(1, "header: %v", err)
	}
	if err := im.header.validate(); err != nil {
		return lineErr(1, "%v", err)
	}
	if im.o.Tenant != "" {
		if _, err := im.conn.Exec(im.ctx, `SELECT mneme.create_tenant($1) WHERE NOT EXISTS (SELECT 1 FROM mneme.tenants WHERE id = $1)`, im.o.Tenant); err != nil {
			return fmt.Errorf("tenant %s: %w", im.o.Tenant, err)
		}
	}
	var embedder string
	var dim int
	if err := im.conn.QueryRow(im.ctx, `SELECT mneme.setting('embedder') #>> '{}', (mneme.setting('embedding_dim') #>> '{}')::int`).Scan(&embedder, &dim); err != nil {
		return fmt.Errorf("read the embedding settings: %w", err)
	}
	model := "hash"
	if embedder == "hash" {
		// The same vectors SQL's hash_embed computes (TestHashEmbedSQLEqualsGo),
		// computed here: the trigger's PL/pgSQL per row was most of an import.
		h := embed.NewHash(dim)
		im.hash = &h
	} else {
		model = im.o.Model
		if model == "" {
			model = "external"
		}
	}
	im.res.KeptEmbedding = im.header.Embeddings && im.header.EmbeddingModel == model && im.header.EmbeddingDim == dim
	return nil
}

func (im *importer) line(n int, kind string, b []byte) error {
	switch kind {
	case kindHeader:
		return lineErr(n, "a second header")
	case kindSetting:
		if im.cur != nil || im.applied {
			return lineErr(n, "setting lines come before the first conversation")
		}
		var s settingLine
		if err := decodeStrict(b, &s); err != nil {
			return lineErr(n, "setting: %v", err)
		}
		if err := s.validate(); err != nil {
			return lineErr(n, "%v", err)
		}
		im.settings = append(im.settings, settingAt{n, s})
		return nil
	case kindConversation:
		var c conversationLine
		if err := decodeStrict(b, &c); err != nil {
			return lineErr(n, "conversation: %v", err)
		}
		if err := c.validate(); err != nil {
			return lineErr(n, "%v", err)
		}
		if err := im.finish(); err != nil {
			return err
		}
		if err := im.applySettings(); err != nil {
			return err
		}
		return im.begin(n, c)
	case kindMessage, kindMemory, kindReview, kindEvent:
		if im.cur == nil {
			return lineErr(n, "a %s line before any conversation line", kind)
		}
		if rank[kind] < im.cur.rank {
			return lineErr(n, "a %s line after the conversation's %s lines (order: messages, memories, reviews, events)", kind, kindByRank(im.cur.rank))
		}
		if im.cur.mode == "erased" && kind != kindEvent {
			return lineErr(n, "an erased conversation has only event lines")
		}
		if rank[kind] > im.cur.rank {
			// The kinds before this one are complete: their counts must
			// match now, before a later line refers to a missing one.
			if err := im.cur.complete(rank[kind]); err != nil {
				return err
			}
		}
		im.cur.rank = rank[kind]
		return im.row(n, kind, b)
	}
	return lineErr(n, "unknown line type %q", kind)
}

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

// applySettings applies the file's settings once, before the first
// conversation, through mneme.set_setting (its rules apply). The embedder
// setting describes the deployment, not the memory: it is not carried.
func (im *importer) applySettings() error {
	if im.applied {
		return nil
	}
	im.applied = true
	if !im.o.Settings || len(im.settings) == 0 {
		return nil
	}
	tx, err := im.conn.Begin(im.ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(im.ctx) //nolint:errcheck // no-op after Commit
	for _, s := range im.settings {
		if s.s.Key == "embedder" {
			continue
		}
		var differs bool
		if err := tx.QueryRow(im.ctx, `SELECT mneme.setting($1) IS DISTINCT FROM $2::jsonb`, s.s.Key, string(s.s.Value)).Scan(&differs); err != nil {
			return &LineError{Line: s.line, Err: fmt.Errorf("setting %s: %w", s.s.Key, err)}
		}
		if !differs {
			continue
		}
		if _, err := tx.Exec(im.ctx, `SELECT mneme.set_setting($1, $2::jsonb)`, s.s.Key, string(s.s.Value)); err != nil {
			return &LineError{Line: s.line, Err: fmt.Errorf("setting %s: %w", s.s.Key, err)}
		}
	}
	return tx.Commit(im.ctx)
}

// begin opens the conversation's transaction.
func (im *importer) begin(n int, c conversationLine) error {
	cv := &conv{fileID: c.ID, id: im.remap(c.ID), line: n, lineOf: map[uuid.UUID]int{}, want: *c.Lines}
	im.cur = cv
	tx, err := im.conn.Begin(im.ctx)
	if err != nil {
		return fmt.Errorf("begin conversation %s: %w", cv.id, err)
	}
	cv.tx = tx
	if im.o.Tenant != "" {
		if _, err := tx.Exec(im.ctx, `SELECT mneme.set_tenant($1)`, im.o.Tenant); err != nil {
			return fmt.Errorf("set tenant %s: %w", im.o.Tenant, err)
		}
	}
	c.ID = cv.id
	if im.o.NewIDs && len(c.PendingReviews) > 0 {
		if c.PendingReviews, err = im.remapReviews(c.PendingReviews); err != nil {
			return lineErr(n, "pending_reviews: %v", err)
		}
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := tx.QueryRow(im.ctx, `SELECT mneme.import_conversation($1::jsonb)`, string(b)).Scan(&cv.mode); err != nil {
		return im.dbErr(n, n, "conversation", err)
	}
	return nil
}

// remapReviews gives the memory ids of pending review entries their new ids.
func (im *importer) remapReviews(raw json.RawMessage) (json.RawMessage, error) {
	var entries []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, err
	}
	for _, e := range entries {
		var ids []uuid.UUID
		if m, ok := e["memory_ids"]; ok {
			if err := json.Unmarshal(m, &ids); err != nil {
				return nil, err
			}
			for i := range ids {
				ids[i] = im.remap(ids[i])
			}
			b, err := json.Marshal(ids)
			if err != nil {
				return nil, err
			}
			e["memory_ids"] = b
		}
	}
	return json.Marshal(entries)
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
		if !im.res.KeptEmbedding {
			m.Embedding = nil
			if im.hash != nil {
				if m.Embedding, err = im.hashEmbedding(m); err != nil {
					return lineErr(n, "embed: %v", err)
				}
			}
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
		r.Memory = im.remap(r.Memory)
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

// hashEmbedding is the built-in embedding of a memory's text.
func (im *importer) hashEmbedding(m memoryLine) (json.RawMessage, error) {
	deref := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	vec, err := im.hash.EmbedOne(embed.MemoryText(deref(m.Title), deref(m.Summary), m.Content))
	if err != nil {
		return nil, err
	}
	return json.Marshal(vec)
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
		rows, err := cv.tx.Query(im.ctx, `SELECT memory_id, link, target FROM mneme.import_memories($1, $2::jsonb)`, cv.id, batch)
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

// finish ends the current conversation: commits it, or checks that the
// tenant's copy holds the file's memories (then it was imported before).
func (im *importer) finish() error {
	cv := im.cur
	if cv == nil {
		return nil
	}
	if err := im.flush(-1); err != nil {
		return err
	}
	if err := cv.complete(rank[kindEvent] + 1); err != nil {
		return err
	}
	if cv.mode == "exists" {
		_ = cv.tx.Rollback(im.ctx)
		cv.tx = nil
		if cv.present != cv.memories {
			return lineErr(cv.line, "conversation %s exists in the tenant but holds %d of the file's %d memories: it was not imported "+
				"from this file (import with --conversations new to give the file's conversations new ids)", cv.id, cv.present, cv.memories)
		}
		im.res.Skipped++
		im.cur = nil
		return nil
	}
	if len(im.pending) > 0 {
		if err := im.setLinks(cv.tx); err != nil {
			return fmt.Errorf("conversation %s (line %d): lineage links: %w", cv.id, cv.line, err)
		}
	}
	if err := cv.tx.Commit(im.ctx); err != nil {
		return im.dbErr(cv.line, cv.line, "conversation", err)
	}
	cv.tx = nil
	im.res.Conversations++
	im.cur = nil
	if cv.mode == "created" && im.o.Embedder != nil && !im.res.KeptEmbedding {
		return im.embed(cv.id)
	}
	return nil
}

// setLinks sets the pending lineage links whose target is in now.
func (im *importer) setLinks(tx pgx.Tx) error {
	b, err := json.Marshal(im.pending)
	if err != nil {
		return err
	}
	rows, err := tx.Query(im.ctx, `SELECT memory_id, link, target FROM mneme.import_links($1::jsonb)`, string(b))
	if err != nil {
		return err
	}
	im.pending, err = pgx.CollectRows(rows, pgx.RowToStructByPos[link])
	return err
}

func (im *importer) dropLinks() error {
	im.res.DroppedLinks = int64(len(im.pending))
	im.pending = nil
	return nil
}

// embed fills the embeddings of a committed conversation's memories (and
// of its episodes' messages, which the segment job embeds too) with the
// external embedder: the model call outside any transaction, each page
// written by its own statements.
func (im *importer) embed(id uuid.UUID) error {
	var afterMemory *uuid.UUID
	for {
		rows, err := im.conn.Query(im.ctx, `SELECT memory_id, memory_text FROM mneme.import_unembedded($1, $2, 64)`, id, afterMemory)
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
		if err := embedPage(im, items, `SELECT mneme.set_embedding($1, $2::real[])`); err != nil {
			return fmt.Errorf("conversation %s: %w", id, err)
		}
		im.res.Embedded += int64(len(items))
		afterMemory = &items[len(items)-1].ID
	}
	var afterMessage int64
	for {
		rows, err := im.conn.Query(im.ctx, `SELECT message_id, content FROM mneme.import_unembedded_messages($1, $2, 64)`, id, afterMessage)
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
		if err := embedPage(im, items, `SELECT mneme.set_message_embedding($1, $2::real[])`); err != nil {
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
func embedPage[K any](im *importer, items []textOf[K], store string) error {
	texts := make([]string, len(items))
	for i, it := range items {
		texts[i] = it.Text
	}
	vecs, err := im.o.Embedder.Embed(im.ctx, texts)
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
	if err := im.conn.SendBatch(im.ctx, b).Close(); err != nil {
		return fmt.Errorf("store embeddings: %w", err)
	}
	return nil
}

var keyDetail = regexp.MustCompile(`\(id\)=\(([0-9a-f-]{36})\)`)

// dbErr names the lines a database error came from; an id another row
// holds already names its line and what to do.
func (im *importer) dbErr(first, last int, kind string, err error) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) && pg.Code == "23505" {
		if m := keyDetail.FindStringSubmatch(pg.Detail); m != nil && im.cur != nil {
			if id, perr := uuid.Parse(m[1]); perr == nil {
				if n, ok := im.cur.lineOf[id]; ok {
					first = n
					last = n
				}
			}
		}
		where := fmt.Sprintf("line %d", first)
		if first != last {
			where = fmt.Sprintf("lines %d to %d", first, last)
		}
		return fmt.Errorf("%s: %w: a %s id is held already by another conversation or tenant (%s): the ids of the file "+
			"are kept unless --conversations new gives them new ones: %w", where, ErrCollision, kind, pg.Detail, err)
	}
	if first == last {
		return &LineError{Line: first, Err: fmt.Errorf("%s: %w", kind, err)}
	}
	return fmt.Errorf("lines %d to %d (%s): %w", first, last, kind, err)
}

// ErrCollision is wrapped by the error of an id another tenant's (or
// conversation's) row holds.
var ErrCollision = errors.New("id collision")
