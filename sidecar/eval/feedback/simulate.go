package feedback

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/sidecar/eval/lifecycle"
	"github.com/mneme-memory/mneme/sidecar/fsrs"
	"github.com/mneme-memory/mneme/sidecar/jobs"
)

// Policy is what happens to FSRS state after a retrieval.
type Policy string

// The compared policies.
const (
	None     Policy = "none"
	AutoGood Policy = "auto-good"
	Review   Policy = "review"
)

// Policies in report order.
var Policies = []Policy{AutoGood, Review, None}

// topK is how many results each retrieval asks for: precision@topK.
const topK = 5

// Options size the simulation.
type Options struct {
	Sessions int // default 30; one simulated day each; new answers arrive after half of them
}

// Point is one session's mean precision@K per policy.
type Point struct {
	Session   int                `json:"session"`
	Queries   int                `json:"queries"`
	Precision map[Policy]float64 `json:"precision"`
}

// Result is the whole run.
type Result struct {
	Sessions int `json:"sessions"`
	K        int `json:"k"`
	Needs    int `json:"needs"`
	Memories int `json:"memories_per_policy"`
	Relevant int `json:"relevant_per_need"`
	// NewAnswersAt is the session at which Later answers arrive (1-based).
	NewAnswersAt int     `json:"new_answers_at_session"`
	Lookalikes   int     `json:"lookalikes_per_need"`
	Points       []Point `json:"points"`
	// LookalikeStability is the mean stability of the lookalike and hub
	// memories at the end, per policy: what each policy taught the store.
	NoiseStability    map[Policy]float64 `json:"noise_stability_end"`
	RelevantStability map[Policy]float64 `json:"relevant_stability_end"`
}

// reviewer is the review handler (pipeline.Pipelines.Review, offline).
type reviewer = jobs.Handler

// Run simulates in one transaction that it rolls back: the database is
// left as it was. Each policy gets its own conversation with the same
// memories. Time passes by moving every memory's last review one day back
// per session, so mneme.search (which evaluates retrievability at now())
// sees the days go by.
func Run(ctx context.Context, db interface {
	Begin(context.Context) (pgx.Tx, error)
}, review reviewer, opts Options, log *slog.Logger) (Result, error) {
	if opts.Sessions <= 0 {
		opts.Sessions = 30
	}
	needs, hubs := buildWorkload()
	res := Result{NewAnswersAt: opts.Sessions/2 + 1, Sessions: opts.Sessions, K: topK, Needs: len(needs), Relevant: len(needs[0].Relevant), Lookalikes: len(needs[0].Lookalikes),
		NoiseStability: map[Policy]float64{}, RelevantStability: map[Policy]float64{}}
	tx, err := db.Begin(ctx)
	if err != nil {
		return res, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // the simulation never commits
	if err := lifecycle.OneServer(ctx, tx, "feedback"); err != nil {
		return res, err
	}

	var now time.Time
	if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return res, err
	}
	convs := map[Policy]uuid.UUID{}
	relevant := map[Policy]map[uuid.UUID]int{} // memory -> need index (answers only)
	var noise = map[Policy][]uuid.UUID{}
	for pi, p := range Policies {
		conv := uuid.NewSHA1(uuid.NameSpaceOID, []byte("mneme-feedback-"+string(p)))
		convs[p] = conv
		relevant[p] = map[uuid.UUID]int{}
		insert := func(content string) (uuid.UUID, error) {
			return insertMemory(ctx, tx, conv, content, now.Add(-24*time.Hour))
		}
		for ni, n := range needs {
			for _, c := range n.Relevant {
				id, err := insert(c)
				if err != nil {
					return res, fmt.Errorf("insert memory: %w", err)
				}
				relevant[p][id] = ni
			}
			for _, c := range n.Lookalikes {
				id, err := insert(c)
				if err != nil {
					return res, fmt.Errorf("insert memory: %w", err)
				}
				noise[p] = append(noise[p], id)
			}
		}
		for _, c := range hubs {
			id, err := insert(c)
			if err != nil {
				return res, fmt.Errorf("insert memory: %w", err)
			}
			noise[p] = append(noise[p], id)
		}
		if pi == 0 {
			res.Memories = len(relevant[p]) + len(noise[p])
		}
	}
	allConvs := make([]uuid.UUID, 0, len(convs))
	for _, c := range convs {
		allConvs = append(allConvs, c)
	}

	tick := 0 // strictly increasing review times within a day
	for s := 0; s < opts.Sessions; s++ {
		if s > 0 {
			if _, err := tx.Exec(ctx, `UPDATE mneme.memories SET last_reviewed_at = last_reviewed_at - interval '1 day'
				WHERE conversation_id = ANY ($1)`, allConvs); err != nil {
				return res, fmt.Errorf("advance a day: %w", err)
			}
		}
		if s == opts.Sessions/2 {
			// The user learns more: new answers, fresh (retrievability 1).
			for _, p := range Policies {
				for ni, n := range needs {
					for _, c := range n.Later {
						id, err := insertMemory(ctx, tx, convs[p], c, now)
						if err != nil {
							return res, fmt.Errorf("insert memory: %w", err)
						}
						relevant[p][id] = ni
					}
				}
			}
		}
		pt := Point{Session: s + 1, Precision: map[Policy]float64{}}
		for ni, n := range needs {
			if !n.due(s) {
				continue
			}
			pt.Queries++
			for _, p := range Policies {
				ids, err := search(ctx, tx, convs[p], n.Query, topK)
				if err != nil {
					return res, err
				}
				var used []uuid.UUID
				for _, id := range ids {
					if ni2, ok := relevant[p][id]; ok && ni2 == ni {
						used = append(used, id)
					}
				}
				pt.Precision[p] += float64(len(used)) / float64(topK)
				tick++
				at := now.Add(time.Duration(tick) * time.Second)
				switch p {
				case AutoGood:
					if err := autoGood(ctx, tx, ids, at); err != nil {
						return res, err
					}
				case Review:
					if err := reviewUse(ctx, tx, review, convs[p], n.Query, ids, used, at); err != nil {
						return res, err
					}
				}
			}
		}
		if pt.Queries > 0 {
			for p := range pt.Precision {
				pt.Precision[p] /= float64(pt.Queries)
			}
		}
		log.Debug("feedback: session", "session", s+1, "precision", pt.Precision)
		res.Points = append(res.Points, pt)
	}
	for _, p := range Policies {
		var rel, noi float64
		if err := tx.QueryRow(ctx, `SELECT avg(stability) FILTER (WHERE id = ANY ($2)), avg(stability) FILTER (WHERE id = ANY ($3))
			FROM mneme.memories WHERE conversation_id = $1`, convs[p], keys(relevant[p]), noise[p]).Scan(&rel, &noi); err != nil {
			return res, err
		}
		res.RelevantStability[p], res.NoiseStability[p] = rel, noi
	}
	return res, nil
}

// insertMemory stores a memory reviewed at its creation.
func insertMemory(ctx context.Context, tx pgx.Tx, conv uuid.UUID, content string, at time.Time) (uuid.UUID, error) {
	// Deterministic ids: ranking ties break by id, and runs must agree.
	id := uuid.NewSHA1(conv, []byte(content))
	_, err := tx.Exec(ctx, `
		INSERT INTO mneme.memories (id, conversation_id, kind, content, summary, source_type, created_at, last_reviewed_at)
		VALUES ($1, $2, 'semantic', $3, $3, 'import', $4, $4)`, id, conv, content, at)
	return id, err
}

func keys(m map[uuid.UUID]int) []uuid.UUID {
	out := make([]uuid.UUID, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func search(ctx context.Context, tx pgx.Tx, conv uuid.UUID, query string, k int) ([]uuid.UUID, error) {
	rows, err := tx.Query(ctx, `SELECT memory_id FROM mneme.search($1, $2, $3)`, conv, query, k)
	if err != nil {
		return nil, fmt.Errorf("mneme.search: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("mneme.search: %w", err)
	}
	return ids, nil
}

// autoGood is the policy mneme refuses: every retrieved memory is rated
// good, used or not.
func autoGood(ctx context.Context, tx pgx.Tx, ids []uuid.UUID, at time.Time) error {
	for _, id := range ids {
		if err := lifecycle.Review(ctx, tx, id, fsrs.Good, at, "auto-good"); err != nil {
			return fmt.Errorf("auto-good: %w", err)
		}
	}
	return nil
}

// reviewUse runs the real review handler (offline reviewer) on the
// retrieval, with the conversation that followed as context: the user's
// question and an answer built from the memories that answered it.
func reviewUse(ctx context.Context, tx pgx.Tx, review reviewer, conv uuid.UUID, query string, ids, used []uuid.UUID, at time.Time) error {
	answer := "I could not find anything useful on that."
	if len(used) > 0 {
		var parts []string
		for _, id := range used {
			var c string
			if err := tx.QueryRow(ctx, `SELECT content FROM mneme.memories WHERE id = $1`, id).Scan(&c); err != nil {
				return err
			}
			parts = append(parts, c)
		}
		answer = "From your notes: " + strings.Join(parts, " ")
	}
	idStrs := make([]string, len(ids))
	for i, id := range ids {
		idStrs[i] = id.String()
	}
	// The conversation that followed, stored as messages of the
	// conversation (already consumed: nothing to segment) and named by id
	// in the payload, as mneme's own review jobs name them.
	if _, err := tx.Exec(ctx, `INSERT INTO mneme.message_queue (id) VALUES ($1) ON CONFLICT DO NOTHING`, conv); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, `INSERT INTO mneme.messages (conversation_id, role, content, created_at, consumed_at)
		VALUES ($1, 'user', $2, $4, $4), ($1, 'assistant', $3, $4, $4) RETURNING id`,
		conv, "What about the "+query+"?", answer, at)
	if err != nil {
		return err
	}
	msgIDs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return err
	}
	args := jobs.ReviewArgs{Reviews: []jobs.PendingReview{{Query: query, MemoryIDs: idStrs}}, ContextMessageIDs: msgIDs, ReviewedAt: at}
	payload, err := json.Marshal(args)
	if err != nil {
		return fmt.Errorf("review payload: %w", err)
	}
	// The handler reads through the simulation's transaction and commits its
	// writes in a savepoint of it.
	job := jobs.Job{Kind: args.Kind(), ConversationID: uuid.NullUUID{UUID: conv, Valid: true}, Payload: payload, Attempts: 1}
	if err := review(ctx, jobs.Inline(tx), job); err != nil {
		return fmt.Errorf("review: %w", err)
	}
	return nil
}
