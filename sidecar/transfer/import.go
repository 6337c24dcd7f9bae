package transfer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

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
	// Jobs is how many conversations are written at once, each on its own
	// connection (default 1). The file is read, checked and batched ahead
	// of them; conversations still commit in the file's order, so the
	// result, and the error of a bad file, are the same for every Jobs.
	Jobs int
	// DeferIndex drops the pgvector HNSW index for the import and builds it
	// again at the end: for a restore into a database no one searches yet
	// (it needs the table's owner; every tenant searches without the index
	// meanwhile).
	DeferIndex bool
	Log        *slog.Logger // nil = discard
	Progress   *Progress
}

// Result is what an import did.
type Result struct {
	Stats
	Seed         uuid.UUID // the remapping seed (NewIDs)
	Embedded     int64     // memories embedded by the external embedder
	DroppedLinks int64     // lineage links to memories not in the file nor the database
	// ErasedConversations and ErasedRows were left out: the tenant erased
	// them (their tombstones name the file's ids; erase is final).
	ErasedConversations int64
	ErasedRows          int64
	KeptEmbedding       bool // the file's embeddings were used
}

type link struct {
	MemoryID uuid.UUID `json:"memory_id"`
	Link     string    `json:"link"`
	Target   uuid.UUID `json:"target"`
}

// conv is a conversation as the reader sees it: the checks that need
// only the file (counts, seqs, order), and the batch being filled.
type conv struct {
	fileID  uuid.UUID
	id      uuid.UUID
	line    int
	erased  bool
	rank    int
	nMsg    int64
	nReview int64
	want    lineCounts
	got     lineCounts
	task    *task
	batch   *item // the batch being filled (nil: none)
}

type importer struct {
	ctx  context.Context
	conn *pgx.Conn
	o    ImportOptions
	// What the workers need to write: see start.
	hash      *embed.Hash // the target embeds with the built-in embedder: computed here
	normalize bool        // the array variant: embeddings are sent L2-normalised
	dim       int         // the database's embedding dimension
	res       Result      // the reader's counts; the workers' are in turns
	header    Header
	settings  []settingAt
	applied   bool
	cur       *conv
	lines     int64 // lines between header and end
	run       *pipeline
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
// import with an error naming it, and its conversation is left as it was
// (the conversations before it are in, the ones after it are not).
//
// This goroutine reads and checks the lines and batches them; o.Jobs
// workers (import_worker.go) write the conversations, each on its own
// connection (conn and copies of its configuration), and commit them in the
// file's order.
func Import(ctx context.Context, conn *pgx.Conn, r io.Reader, o ImportOptions) (_ Result, err error) {
	if o.Batch <= 0 {
		o.Batch = 1000
	}
	if o.Jobs <= 0 {
		o.Jobs = 1
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	im := &importer{ctx: ctx, conn: conn, o: o}
	if o.DeferIndex {
		rebuild, err := deferIndex(ctx, conn, o.Log)
		if err != nil {
			return im.res, err
		}
		defer func() {
			if berr := rebuild(); berr != nil {
				err = errors.Join(err, berr)
			}
		}()
	}
	if o.NewIDs {
		im.res.Seed = o.Seed
		if im.res.Seed == uuid.Nil {
			im.res.Seed = uuid.New()
		}
	}
	err = im.read(r)
	if im.run != nil {
		// The workers finish what they were given (or give it up after a
		// failure); the first failed conversation's error is the import's.
		if werr := im.run.wait(im.cur); werr != nil {
			err = werr
		}
		im.res.Conversations, im.res.Skipped = im.run.turns.conversations, im.run.turns.skipped
		im.res.Embedded = im.run.turns.embedded
		im.res.ErasedConversations, im.res.ErasedRows = im.run.turns.erasedConversations, im.run.turns.erasedRows
		if err == nil {
			im.res.DroppedLinks = int64(len(im.run.turns.pending))
		}
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

// read reads the file. An error within a conversation goes to its worker
// (after the batches before it: a batch that fails in the database first
// is the error), which gives the conversation up; read then returns nil.
func (im *importer) read(r io.Reader) error {
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
		if im.run != nil && im.run.stopped() {
			return nil // a conversation failed: its error is the import's
		}
		b, err := rd.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return im.fail(err)
		}
		n := rd.n
		im.res.Lines++
		if ended {
			return lineErr(n, "a line after the end line")
		}
		kind, pre := decodeRow(b)
		if pre == nil {
			if kind, err = lineType(b); err != nil {
				return im.fail(lineErr(n, "%v", err))
			}
		}
		if kind == kindEnd {
			var e endLine
			if err := decodeStrict(b, &e); err != nil {
				return im.fail(lineErr(n, "end: %v", err))
			}
			// Checked before the last conversation commits: a line lost
			// from it leaves it out.
			convs := im.res.Conversations
			if e.Lines != im.lines || e.Conversations != convs {
				return im.fail(lineErr(n, "the end line counts %d lines and %d conversations, the file has %d and %d",
					e.Lines, e.Conversations, im.lines, convs))
			}
			if err := im.applySettings(); err != nil {
				return err
			}
			if err := im.finish(); err != nil {
				return im.fail(err)
			}
			ended = true
			continue
		}
		im.lines++
		if err := im.line(n, kind, b, pre); err != nil {
			return im.fail(err)
		}
		im.o.Progress.Set(im.res.Memories, im.res.Lines)
	}
	if !ended {
		return im.fail(lineErr(rd.n+1, "the file ends without its end line (truncated?): the conversation it ends in was not imported"))
	}
	return nil
}

// fail hands err to the current conversation's worker (which gives the
// conversation up with it), or returns it when no conversation is open.
func (im *importer) fail(err error) error {
	if im.cur == nil {
		return err
	}
	if b := im.cur.batch; b != nil {
		// Its lines are checked as one conversation after another would
		// (an embedding of the wrong size before the error), not written.
		b.dry = true
		im.flush()
	}
	im.run.send(im.cur, item{err: err})
	im.cur = nil
	return nil
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
	var embedder, variant string
	var dim int
	if err := im.conn.QueryRow(im.ctx, `SELECT mneme.setting('embedder') #>> '{}', (mneme.setting('embedding_dim') #>> '{}')::int,
		mneme.setting('vector_variant') #>> '{}'`).Scan(&embedder, &dim, &variant); err != nil {
		return fmt.Errorf("read the embedding settings: %w", err)
	}
	im.normalize, im.dim = variant == "array", dim
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

// line takes one line of kind (pre: the line decoded already, or nil).
func (im *importer) line(n int, kind string, b []byte, pre any) error {
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
		if im.cur.erased && kind != kindEvent {
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
		return im.row(n, kind, b, pre)
	}
	return lineErr(n, "unknown line type %q", kind)
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
			return &LineError{Line: s.line, Err: fmt.Errorf("setting %s (--no-settings imports without the file's settings): %w", s.s.Key, err)}
		}
	}
	return tx.Commit(im.ctx)
}

// begin starts a conversation: the workers start with the first one (the
// settings are in by then), and the conversation goes to the next free one.
func (im *importer) begin(n int, c conversationLine) error {
	cv := &conv{fileID: c.ID, id: im.remap(c.ID), line: n, erased: c.Erased, want: *c.Lines}
	c.ID = cv.id
	reviewsWas := c.PendingReviews
	if im.o.NewIDs && len(c.PendingReviews) > 0 {
		var err error
		if c.PendingReviews, err = im.remapReviews(c.PendingReviews); err != nil {
			return lineErr(n, "pending_reviews: %v", err)
		}
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if im.run == nil {
		if im.run, err = im.startWorkers(); err != nil {
			return err
		}
	}
	im.res.Conversations++
	im.cur = cv
	cv.task = im.run.dispatch()
	im.run.send(cv, item{begin: b, conv: cv.id, was: cv.fileID, erased: cv.erased, reviewsWas: reviewsWas, first: n, last: n, barrier: im.run.touches(cv.task, cv.id)})
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
