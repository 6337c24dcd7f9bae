package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/sidecar/clip"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/jobs"
	"github.com/mneme-memory/mneme/sidecar/revision"
)

// message is one queued message.
type message struct {
	ID      int64     `json:"id"`
	Role    string    `json:"role"`
	Content string    `json:"content"`
	At      time.Time `json:"at"`
}

// episode is one memory the segmenter decided to create.
type episode struct {
	Messages []message
	Summary  string
	Surprise float64
	Label    string
	Pinned   bool
	// Facts the episode states (the LLM segmenter's; the offline
	// extractor's are found in Segment), stored beside it when setting
	// extract_facts is on.
	Facts []revision.Extracted
}

// priorMemory is an existing memory of the conversation, for novelty.
type priorMemory struct {
	Summary string
	Content string
}

// Segment is the handler of kind "segment".
//
// It reads the conversation's queue as sessions (readSessions: split at
// every gap, segment_now mark and hole) and its recent memories, lets the
// segmenter decide per session (segmentSessions) and the embedder embed,
// all with no transaction open. What it stores depends on the messages
// only, not on the payload nor on when it runs: the payload says why the
// job was enqueued. Then, in one short transaction, it locks the
// conversation's queue: if any message it read was consumed meanwhile,
// another segmentation ran first, and it rolls back and reads again.
// Otherwise it takes the pending reviews (on every path, create or skip)
// and enqueues a review job for them, inserts the episodes and drains
// exactly their messages, and completes the job.
func (p *Pipelines) Segment(ctx context.Context, db jobs.Store, job jobs.Job) error {
	if !job.ConversationID.Valid {
		return fmt.Errorf("segment job %d has no conversation: %w", job.ID, jobs.ErrPermanent)
	}
	conv := job.ConversationID.UUID
	var pl jobs.SegmentArgs
	if err := json.Unmarshal(job.Payload, &pl); err != nil {
		return fmt.Errorf("segment job %d: payload %s: %v: %w", job.ID, clip.String(string(job.Payload), 200), err, jobs.ErrPermanent)
	}
	set, err := loadSettings(ctx, db)
	if err != nil {
		return err
	}
	log := p.log.With("job", job.ID, "conversation", conv, "reason", pl.Reason)
	for attempt := 1; ; attempt++ {
		consumed, err := p.segmentOnce(ctx, db, job, conv, set, log)
		if err != nil || !consumed {
			return err
		}
		if attempt == segmentAttempts {
			return fmt.Errorf("segment job %d: other segmentations consumed its messages %d times in a row; retrying later", job.ID, attempt)
		}
		log.Info("segment: the queue changed under the job (another segmentation consumed some of its messages); reading it again")
	}
}

// segmentAttempts is how many times a job reads the queue again in one run
// when other segmentations keep consuming its messages first.
const segmentAttempts = 5

// segmentOnce reads, decides and writes once. consumed reports that
// another segmentation consumed some of the messages it read before it
// could lock the queue: nothing was written and the job is not complete
// (its Commit rolled back), so the caller reads again.
func (p *Pipelines) segmentOnce(ctx context.Context, db jobs.Store, job jobs.Job, conv uuid.UUID,
	set settings, log *slog.Logger) (consumed bool, err error) {
	// Reads, no transaction open.
	read, err := readSessions(ctx, db, conv, readLimit(set))
	if err != nil {
		return false, err
	}
	msgs := read.All
	var eps []episode
	var embs [][]float32
	var msgEmbs map[int64][]float32
	if len(msgs) > 0 {
		prior, err := priorMemories(ctx, db, conv, max(heuristicPrior, llmPrior))
		if err != nil {
			return false, err
		}
		var labels []labelMeaning
		if _, ok := p.segmenter.(llmSegmenter); ok {
			if labels, err = labelVocabulary(ctx, db); err != nil {
				return false, err
			}
		}
		// Decide: the segmenter, then the embedder (model calls).
		if eps, err = p.segmentSessions(ctx, conv, read, prior, set, labels); err != nil {
			return false, fmt.Errorf("segment job %d: %w", job.ID, err)
		}
		if err := extractiveSummaries(ctx, db, conv, eps); err != nil {
			return false, fmt.Errorf("segment job %d: %w", job.ID, err)
		}
		if embs, msgEmbs, err = p.embedEpisodes(ctx, eps, set); err != nil {
			return false, fmt.Errorf("segment job %d: %w", job.ID, err)
		}
		p.findFacts(eps, set, log)
	}

	// Writes: one short transaction under the queue row lock.
	ids := make([]int64, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	err = db.Commit(ctx, func(tx pgx.Tx) error {
		var unchanged bool
		if err := tx.QueryRow(ctx, `SELECT mneme.lock_queued($1, $2)`, conv, ids).Scan(&unchanged); err != nil {
			return fmt.Errorf("segment job %d: lock queue: %w", job.ID, err)
		}
		if !unchanged {
			return errQueueChanged // rolled back: the job reads again
		}
		if err := p.handOverReviews(ctx, tx, conv, reviewContext(eps, msgs), log); err != nil {
			return fmt.Errorf("segment job %d: %w", job.ID, err)
		}
		if len(eps) == 0 {
			log.Debug("segment: nothing to store yet", "queued", len(msgs), "sessions", len(read.Sessions))
		} else {
			ids, err := p.createEpisodes(ctx, tx, conv, eps, embs, log)
			if err != nil {
				return fmt.Errorf("segment job %d: %w", job.ID, err)
			}
			if err := setMessageEmbeddings(ctx, tx, msgs, msgEmbs); err != nil {
				return fmt.Errorf("segment job %d: %w", job.ID, err)
			}
			for i, e := range eps {
				if err := p.addFacts(ctx, tx, conv, ids[i], e.Facts, log); err != nil {
					return fmt.Errorf("segment job %d: %w", job.ID, err)
				}
			}
		}
		// Messages after the last one read (past the read's limit, or
		// committed since the read by a writer that found this job pending
		// and enqueued none) get a job of their own: under the queue row
		// lock, every writer before it has committed.
		var lastRead int64
		if len(msgs) > 0 {
			lastRead = msgs[len(msgs)-1].ID
		}
		var next *int64
		if err := tx.QueryRow(ctx, `SELECT mneme._segment_followup($1, $2)`, conv, lastRead).Scan(&next); err != nil {
			return fmt.Errorf("segment job %d: follow-up: %w", job.ID, err)
		}
		if next != nil {
			log.Debug("segment: messages after the ones read get their own job", "next_job", *next, "truncated", read.Truncated)
		}
		return nil
	})
	if errors.Is(err, errQueueChanged) {
		return true, nil
	}
	return false, err
}

// reviewContext is what a review the job hands over judges by: the
// messages of the episodes it stores, or, when it stores none, every
// message it read.
func reviewContext(eps []episode, read []message) []message {
	if len(eps) == 0 {
		return read
	}
	var out []message
	for _, e := range eps {
		out = append(out, e.Messages...)
	}
	return out
}

// errQueueChanged rolls back a segment job's transaction when another
// segmentation consumed some of the messages it read.
var errQueueChanged = errors.New("the queue changed under the segment job")

// labelVocabulary reads the labels and their meanings from SQL, the one
// definition of the vocabulary.
func labelVocabulary(ctx context.Context, db jobs.Querier) ([]labelMeaning, error) {
	rows, err := db.Query(ctx, `SELECT label, meaning FROM mneme.label_vocabulary()`)
	if err != nil {
		return nil, fmt.Errorf("label vocabulary: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[labelMeaning])
}

// extractiveSummaries gives every episode without a summary (the offline
// segmenter's, an LLM's empty one) the extractive one SQL computes by the
// search's term weights (mneme.extractive_summary), all in one round trip.
// NULL from SQL (no sentence with an indexed word) stays empty.
func extractiveSummaries(ctx context.Context, db jobs.Querier, conv uuid.UUID, eps []episode) error {
	type texts struct {
		Episode  int      `json:"episode"`
		Roles    []string `json:"roles"`
		Contents []string `json:"contents"`
	}
	var in []texts
	for i, e := range eps {
		if strings.TrimSpace(e.Summary) != "" {
			continue
		}
		t := texts{Episode: i, Roles: make([]string, len(e.Messages)), Contents: make([]string, len(e.Messages))}
		for j, m := range e.Messages {
			t.Roles[j], t.Contents[j] = m.Role, m.Content
		}
		in = append(in, t)
	}
	if len(in) == 0 {
		return nil
	}
	payload, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("extractive summary: %w", err)
	}
	rows, err := db.Query(ctx, `SELECT (x.e ->> 'episode')::int,
		mneme.extractive_summary($1, ARRAY(SELECT jsonb_array_elements_text(x.e -> 'roles')),
		                         ARRAY(SELECT jsonb_array_elements_text(x.e -> 'contents')))
		FROM jsonb_array_elements($2::jsonb) AS x(e)`, conv, payload)
	if err != nil {
		return fmt.Errorf("extractive summary: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var i int
		var s *string
		if err := rows.Scan(&i, &s); err != nil {
			return fmt.Errorf("extractive summary: %w", err)
		}
		if s != nil && i >= 0 && i < len(eps) {
			eps[i].Summary = *s
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("extractive summary: %w", err)
	}
	return nil
}

// embedEpisodes embeds the new memories with an external embedder, and in
// the same batch each of their messages (the context finds turns by
// meaning with them). With the built-in hash embedder the memories are
// embedded here by its Go twin (mneme.hash_embed's equal, to 1e-6; the
// SQL trigger would otherwise do it inside the job's write transaction,
// a third of its time under bench ingest) and messages get none.
func (p *Pipelines) embedEpisodes(ctx context.Context, eps []episode, set settings) ([][]float32, map[int64][]float32, error) {
	if len(eps) == 0 {
		return nil, nil, nil
	}
	texts := make([]string, 0, len(eps))
	for _, e := range eps {
		// The summary as create_episodes stores it (btrim: spaces only).
		texts = append(texts, embed.MemoryText("", strings.Trim(e.Summary, " "), episodeContent(e.Messages)))
	}
	if set.Embedder == "hash" {
		embs, err := embed.NewHash(set.EmbeddingDim).Embed(ctx, texts)
		if err != nil {
			return nil, nil, fmt.Errorf("hash-embed %d episodes: %w", len(eps), err)
		}
		return embs, nil, nil
	}
	var ids []int64
	for _, e := range eps {
		for _, m := range e.Messages {
			if embed.IsBlank(m.Content) {
				continue // nothing to find it by (add_message refuses such messages)
			}
			ids = append(ids, m.ID)
			texts = append(texts, m.Content)
		}
	}
	embs, err := p.embed.Embed(ctx, texts)
	if err != nil {
		return nil, nil, fmt.Errorf("embed %d episodes and their %d messages: %w", len(eps), len(ids), err)
	}
	if len(embs) != len(texts) {
		return nil, nil, fmt.Errorf("the embedder returned %d embeddings for %d texts", len(embs), len(texts))
	}
	for _, e := range embs {
		if len(e) != set.EmbeddingDim {
			return nil, nil, fmt.Errorf("the embedder returned %d dimensions, the database has %d: %w",
				len(e), set.EmbeddingDim, jobs.ErrPermanent)
		}
	}
	msgs := make(map[int64][]float32, len(ids))
	for i, id := range ids {
		msgs[id] = embs[len(eps)+i]
	}
	return embs[:len(eps)], msgs, nil
}

// setMessageEmbeddings stores the embeddings of an episode's messages
// (mneme.set_message_embedding), in one round trip.
func setMessageEmbeddings(ctx context.Context, tx pgx.Tx, msgs []message, embs map[int64][]float32) error {
	if len(embs) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for _, m := range msgs {
		if e, ok := embs[m.ID]; ok {
			b.Queue(`SELECT mneme.set_message_embedding($1, $2)`, m.ID, e)
		}
	}
	if b.Len() == 0 {
		return nil
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("store message embeddings: %w", err)
	}
	return nil
}

// episodeInput is one episode as mneme.create_episodes reads it.
type episodeInput struct {
	MessageIDs []int64   `json:"message_ids"`
	Content    string    `json:"content"`
	Summary    string    `json:"summary"`
	Embedding  []float32 `json:"embedding,omitempty"`
	Surprise   float32   `json:"surprise"`
	Label      string    `json:"label,omitempty"`
	Pinned     bool      `json:"pinned"`
}

// createEpisodes inserts a job's episodic memories and drains their
// messages in one statement (mneme.create_episodes) and returns their ids
// in order. SQL chooses what the segmenter left open: the label when it
// gave none or one outside the vocabulary (mneme.auto_label) and the
// label's initial FSRS state (mneme.initial_state).
func (p *Pipelines) createEpisodes(ctx context.Context, tx pgx.Tx, conv uuid.UUID, eps []episode, embs [][]float32, log *slog.Logger) ([]uuid.UUID, error) {
	in := make([]episodeInput, len(eps))
	for i, e := range eps {
		mids := make([]int64, len(e.Messages))
		for j, m := range e.Messages {
			mids[j] = m.ID
		}
		in[i] = episodeInput{MessageIDs: mids, Content: episodeContent(e.Messages), Summary: e.Summary,
			Surprise: float32(e.Surprise), Label: e.Label, Pinned: e.Pinned}
		if embs != nil {
			in[i].Embedding = embs[i]
		}
	}
	payload, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("create episodes: %w", err)
	}
	// A label outside the vocabulary is left to SQL (auto_label), not an error.
	rows, err := tx.Query(ctx, `SELECT memory_id, label, stability FROM mneme.create_episodes($1,
		(SELECT jsonb_agg(CASE WHEN mneme.is_label(x.ep ->> 'label') THEN x.ep ELSE x.ep - 'label' END ORDER BY x.n)
		 FROM jsonb_array_elements($2::jsonb) WITH ORDINALITY AS x(ep, n)))`, conv, payload)
	if err != nil {
		return nil, fmt.Errorf("create %d episodes: %w", len(eps), err)
	}
	type created struct {
		ID        uuid.UUID
		Label     string
		Stability float64
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[created])
	if err != nil {
		return nil, fmt.Errorf("create %d episodes: %w", len(eps), err)
	}
	if len(out) != len(eps) {
		return nil, fmt.Errorf("create episodes: %d created for %d episodes", len(out), len(eps))
	}
	ids := make([]uuid.UUID, len(out))
	for i, c := range out {
		ids[i] = c.ID
		e, mids := eps[i], in[i].MessageIDs
		if e.Label != "" && c.Label != e.Label {
			log.Warn("segment: label outside the vocabulary, chosen by mneme.auto_label instead", "memory", c.ID, "got", e.Label, "label", c.Label)
		}
		log.Info("segment: episode created", "memory", c.ID, "messages", len(mids), "first", mids[0], "last", mids[len(mids)-1],
			"surprise", e.Surprise, "label", c.Label, "stability", c.Stability)
	}
	return ids, nil
}

// findFacts gives each episode its facts when setting extract_facts is on:
// the offline extractor's, unless an LLM segmenter returned them already;
// at most extract_facts_max, the first ones (mneme.add_fact refuses more:
// one message listing thousands of facts would otherwise become thousands
// of memories and revise jobs). Assistant, system and tool turns state
// nothing about the user.
func (p *Pipelines) findFacts(eps []episode, set settings, log *slog.Logger) {
	for i := range eps {
		if !set.ExtractFacts {
			eps[i].Facts = nil
			continue
		}
		if !p.llmFacts {
			eps[i].Facts = extractFacts(eps[i].Messages)
		}
		if n := len(eps[i].Facts); n > set.FactsMax {
			eps[i].Facts = eps[i].Facts[:set.FactsMax]
			log.Warn("segment: more facts than extract_facts_max; the rest stay in the episode only",
				"facts", n, "kept", set.FactsMax)
		}
	}
}

// extractFacts is the offline extractor's facts of an episode's messages.
func extractFacts(episode []message) []revision.Extracted {
	msgs := make([]revision.Message, 0, len(episode))
	for _, m := range episode {
		switch strings.ToLower(m.Role) {
		case "assistant", "system", "tool":
			continue
		}
		msgs = append(msgs, revision.Message{ID: m.ID, Speaker: m.Role, Content: m.Content})
	}
	return revision.ExtractFacts(msgs)
}

// addFacts stores an episode's facts (mneme.add_fact: a semantic memory
// each, with its messages as provenance and a revise job).
func (p *Pipelines) addFacts(ctx context.Context, tx pgx.Tx, conv, episode uuid.UUID, facts []revision.Extracted, log *slog.Logger) error {
	for _, f := range facts {
		var id uuid.UUID
		if err := tx.QueryRow(ctx, `SELECT mneme.add_fact($1, $2, $3, $4)`, conv, f.Text, f.MessageIDs, episode).Scan(&id); err != nil {
			return fmt.Errorf("add fact %q: %w", clip.String(f.Text, 80), err)
		}
	}
	if len(facts) > 0 {
		log.Info("segment: facts extracted", "episode", episode, "facts", len(facts))
	}
	return nil
}

// handOverReviews takes the conversation's pending reviews and, if there
// were any, enqueues a review job with them as they are, the messages as
// context and reviewed_at = the newest message's time (now when none).
func (p *Pipelines) handOverReviews(ctx context.Context, tx pgx.Tx, conv uuid.UUID, msgs []message, log *slog.Logger) error {
	var pending []byte
	if err := tx.QueryRow(ctx, `SELECT mneme.take_pending_reviews($1)`, conv).Scan(&pending); err != nil {
		return fmt.Errorf("take pending reviews: %w", err)
	}
	if pending == nil {
		return nil
	}
	at := time.Now().UTC()
	if len(msgs) > 0 {
		at = msgs[len(msgs)-1].At
	}
	ids := make([]int64, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	var reviews []jobs.PendingReview
	if err := json.Unmarshal(pending, &reviews); err != nil {
		return fmt.Errorf("take pending reviews: %w", err)
	}
	jobID, err := jobs.Enqueue(ctx, tx, uuid.NullUUID{UUID: conv, Valid: true},
		jobs.ReviewArgs{Reviews: reviews, ContextMessageIDs: ids, ReviewedAt: at})
	if err != nil {
		return err
	}
	log.Info("segment: pending reviews handed to a review job", "review_job", jobID)
	return nil
}

func scanMessage(r pgx.CollectableRow) (message, error) {
	var m message
	err := r.Scan(&m.ID, &m.Role, &m.Content, &m.At)
	m.At = m.At.UTC()
	return m, err
}

// priorMemories are the conversation's most recent active memories, newest
// first (mneme.recent_memories).
func priorMemories(ctx context.Context, db jobs.Querier, conv uuid.UUID, limit int) ([]priorMemory, error) {
	rows, err := db.Query(ctx, `SELECT summary, content FROM mneme.recent_memories($1, $2)`, conv, limit)
	if err != nil {
		return nil, fmt.Errorf("read prior memories: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (priorMemory, error) {
		var m priorMemory
		return m, r.Scan(&m.Summary, &m.Content)
	})
	if err != nil {
		return nil, fmt.Errorf("read prior memories: %w", err)
	}
	return out, nil
}

// episodeContent is a memory's content: one line per message with its
// speaker; the time is written on the first line and again only where at
// least stampEvery passed since the last time written, so timestamps do
// not dominate what is indexed and embedded, nor use up a prompt budget.
func episodeContent(msgs []message) string {
	var b strings.Builder
	var stamped time.Time
	for i, m := range msgs {
		if i > 0 {
			b.WriteByte('\n')
		}
		if i == 0 || m.At.Sub(stamped) >= stampEvery {
			stamped = m.At
			fmt.Fprintf(&b, "[%s] ", m.At.UTC().Format("2006-01-02 15:04"))
		}
		fmt.Fprintf(&b, "%s: %s", m.Role, strings.TrimSpace(m.Content))
	}
	return b.String()
}

// stampEvery is how much time passes within an episode before a message's
// line carries its time again.
const stampEvery = 10 * time.Minute
