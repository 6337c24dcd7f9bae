package tests

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// The pipelines' SQL functions reject bad input with an SQLSTATE, and a
// failed call writes nothing.
func TestPipelineSQLBadInput(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, false)
	ctx := context.Background()
	e.session(day1, rustSession)
	var ids []int64
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT array_agg(id ORDER BY id) FROM mneme.queued_messages($1)`, e.conv).Scan(&ids))
	require.Len(t, ids, 6)

	episode := func(ids []int64, label string, surprise float32, stability float64) error {
		_, err := e.db.Pool.Exec(ctx, `SELECT mneme.create_episode($1, $2, 'content', 'summary', NULL, $3, $4, false, $5, 5)`,
			e.conv, ids, surprise, label, stability)
		return err
	}
	code := func(err error) string {
		var pe *pgconn.PgError
		require.True(t, errors.As(err, &pe), "want a PostgreSQL error, got %v", err)
		return pe.Code
	}
	require.Equal(t, "22023", code(episode(ids, "Project X", 0.5, 3)))
	require.Equal(t, "22023", code(episode(ids, "general", 1.5, 3)))
	require.Equal(t, "22023", code(episode(ids, "general", 0.5, 0)))
	require.Equal(t, "22023", code(episode([]int64{}, "general", 0.5, 3)))
	require.Equal(t, "55000", code(episode([]int64{ids[0], 0}, "general", 0.5, 3)), "a message that does not exist is not queued")
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.memories`))

	require.NoError(t, episode(ids[:3], "project_rust", 0.5, 3))
	require.Equal(t, "55000", code(episode(ids[2:], "general", 0.5, 3)), "message 3 is consumed")
	var ok bool
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT mneme.lock_queued($1, $2)`, e.conv, ids[2:]).Scan(&ok))
	require.False(t, ok)
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT mneme.lock_queued($1, $2)`, e.conv, ids[3:]).Scan(&ok))
	require.True(t, ok)
	mems := e.memories()
	require.Len(t, mems, 1)
	require.Equal(t, ids[:3], mems[0].SourceIDs)
	require.Equal(t, 3, e.count(`SELECT count(*) FROM mneme.messages WHERE memory_id = $1`, mems[0].ID))

	review := func(rating, reviewer string, at time.Time) error {
		_, err := e.db.Pool.Exec(ctx, `SELECT mneme.apply_review($1, $2, 5, 5, 'review', $3, $4)`, mems[0].ID, rating, at, reviewer)
		return err
	}
	later := mems[0].LastReview.Add(time.Hour)
	require.Equal(t, "22023", code(review("great", "llm", later)))
	require.Equal(t, "22023", code(review("good", "oracle", later)))
	require.Equal(t, "22004", code(func() error {
		_, err := e.db.Pool.Exec(ctx, `SELECT mneme.apply_review(NULL, 'good', 5, 5, 'review', now(), 'llm')`)
		return err
	}()))
	var applied bool
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT mneme.apply_review($1, 'good', 5, 5, 'review', $2, 'llm')`, uuid.New(), later).Scan(&applied))
	require.False(t, applied, "unknown memory")
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.review_log`))
	require.Equal(t, "22004", code(func() error {
		_, err := e.db.Pool.Exec(ctx, `SELECT * FROM mneme.queued_messages(NULL)`)
		return err
	}()))
	for q, want := range map[string]string{
		`SELECT * FROM mneme.queued_sessions(NULL, 10)`:       "22004",
		`SELECT * FROM mneme.queued_sessions($1, 0)`:          "22023",
		`SELECT * FROM mneme.queued_sessions($1, NULL)`:       "22023",
		`SELECT * FROM mneme._segment_followup($1, NULL)`:     "22004",
		`SELECT * FROM mneme._segment_followup(NULL, 1, 1)`:   "22004",
		`SELECT * FROM mneme.queued_sessions($1, -5) LIMIT 1`: "22023",
	} {
		var args []any
		if strings.Contains(q, "$1") {
			args = append(args, e.conv)
		}
		_, err := e.db.Pool.Exec(ctx, q, args...)
		require.Equal(t, want, code(err), q)
	}
}

// mneme.create_episodes: a job's episodes in one statement, in order, each
// labelled and given its initial state; bad input names the episode and
// writes nothing, and a message goes into one episode only.
func TestCreateEpisodes(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, false)
	ctx := context.Background()
	e.session(day1, rustSession)
	var ids []int64
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT array_agg(id ORDER BY id) FROM mneme.queued_messages($1)`, e.conv).Scan(&ids))
	require.Len(t, ids, 6)
	create := func(episodes string, args ...any) error {
		_, err := e.db.Pool.Exec(ctx, `SELECT * FROM mneme.create_episodes($1, `+episodes+`)`, append([]any{e.conv}, args...)...)
		return err
	}
	code := func(err error) string {
		var pe *pgconn.PgError
		require.True(t, errors.As(err, &pe), "want a PostgreSQL error, got %v", err)
		return pe.Code
	}
	require.Equal(t, "22023", code(create(`'[]'`)))
	require.Equal(t, "22023", code(create(`'{}'`)))
	require.Equal(t, "22023", code(create(`'[1]'`)))
	require.Equal(t, "22004", code(create(`'[{"content": "x", "surprise": 0.5}]'`)), "no message_ids")
	require.Equal(t, "22023", code(create(`jsonb_build_array(jsonb_build_object('message_ids', $2::bigint[], 'content', ' ', 'surprise', 0.5))`, ids[:2])))
	require.Equal(t, "22023", code(create(`jsonb_build_array(jsonb_build_object('message_ids', $2::bigint[], 'content', 'c', 'surprise', 2))`, ids[:2])))
	require.Equal(t, "22023", code(create(`jsonb_build_array(jsonb_build_object('message_ids', $2::bigint[], 'content', 'c', 'surprise', 0.5, 'label', 'Project X'))`, ids[:2])))
	err := create(`jsonb_build_array(jsonb_build_object('message_ids', $2::bigint[], 'content', 'a', 'surprise', 0.5),
		jsonb_build_object('message_ids', $3::bigint[], 'content', 'b', 'surprise', 0.5))`, ids[:3], ids[2:])
	require.Equal(t, "22023", code(err), "message 3 in two episodes")
	require.ErrorContains(t, err, "episode 2")
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.memories`), "a failed call writes nothing")

	rows, err := e.db.Pool.Query(ctx, `SELECT episode, memory_id, label, stability FROM mneme.create_episodes($1,
		jsonb_build_array(jsonb_build_object('message_ids', $2::bigint[], 'content', 'first', 'summary', 'one', 'surprise', 0.2),
		                  jsonb_build_object('message_ids', $3::bigint[], 'content', 'second', 'surprise', 0.9,
		                                     'label', 'project_rust', 'pinned', true)))`, e.conv, ids[:4], ids[4:])
	require.NoError(t, err)
	type created struct {
		Episode   int
		ID        uuid.UUID
		Label     string
		Stability float64
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[created])
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, []int{1, 2}, []int{got[0].Episode, got[1].Episode})
	require.NotEmpty(t, got[0].Label, "labelled by the rules")
	require.Equal(t, "project_rust", got[1].Label)
	for _, c := range got {
		require.Positive(t, c.Stability, "the label's initial state")
	}
	require.Equal(t, 4, e.count(`SELECT count(*) FROM mneme.messages WHERE memory_id = $1`, got[0].ID))
	require.Equal(t, 2, e.count(`SELECT count(*) FROM mneme.messages WHERE memory_id = $1 AND consumed_at IS NOT NULL`, got[1].ID))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM mneme.memories WHERE id = $1 AND pinned AND summary IS NULL
		AND source_message_ids = $2`, got[1].ID, ids[4:]))
	require.Equal(t, 2, e.count(`SELECT count(*) FROM mneme.bm25_docs`), "both in the BM25 statistics")
	require.Equal(t, "55000", code(create(`jsonb_build_array(jsonb_build_object('message_ids', $2::bigint[], 'content', 'c', 'surprise', 0.5))`, ids[:1])))
}

// TestFactsPerEpisodeCapped: one message stating hundreds of facts stores
// at most extract_facts_max of them (and as many revise jobs), and
// mneme.add_fact itself refuses more (54000), with or without an episode.
func TestFactsPerEpisodeCapped(t *testing.T) {
	t.Parallel()
	e := newPipelineEnv(t, false)
	ctx := context.Background()
	var b strings.Builder
	for i := range 300 {
		fmt.Fprintf(&b, "I own red car number %d. ", i)
	}
	e.say("2026-01-05 10:00:00+00", "user", b.String())
	_, err := e.db.Pool.Exec(ctx, `SELECT mneme.segment_now($1)`, e.conv)
	require.NoError(t, err)
	e.drain()
	require.Zero(t, e.count(`SELECT count(*) FROM mneme.jobs WHERE state = 'failed'`))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM mneme.memories WHERE kind = 'episodic'`), "the episode keeps the whole message")
	require.Equal(t, 20, e.count(`SELECT count(*) FROM mneme.memories WHERE source_type = 'extracted'`), "extract_facts_max (20) facts")
	require.Equal(t, 20, e.count(`SELECT count(*) FROM mneme.jobs WHERE kind = 'revise'`))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM mneme.memories WHERE source_type = 'extracted' AND content LIKE '%I own red car number 0.'`),
		"the first facts are the ones kept")

	// The cap in SQL: no caller of add_fact gets past it.
	_, err = e.db.Pool.Exec(ctx, `SELECT mneme.set_setting('extract_facts_max', '2')`)
	require.NoError(t, err)
	conv := uuid.New()
	var msg int64
	require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT mneme.add_message($1, 'user', 'I like tea. I like jam. I like scones.')`, conv).Scan(&msg))
	for _, episode := range []bool{false, true} {
		err := pgx.BeginFunc(ctx, e.db.Pool, func(tx pgx.Tx) error {
			var ep *uuid.UUID
			if episode {
				var id uuid.UUID
				if err := tx.QueryRow(ctx, `SELECT mneme.create_episode($1, $2, 'user: I like tea', 'tea', NULL, 0.5, NULL, false, NULL, NULL)`,
					conv, []int64{msg}).Scan(&id); err != nil {
					return err
				}
				ep = &id
			}
			for i, f := range []string{"I like tea.", "I like jam.", "I like scones."} {
				_, err := tx.Exec(ctx, `SELECT mneme.add_fact($1, $2, $3, $4)`, conv, f, []int64{msg}, ep)
				if i < 2 {
					require.NoError(t, err, "fact %d of 2", i+1)
				} else {
					require.Error(t, err, "the third fact of one episode (episode given: %v)", episode)
					require.Equal(t, "54000", sqlState(t, err))
					require.Contains(t, err.Error(), "extract_facts_max")
				}
			}
			return errors.New("roll back")
		})
		require.EqualError(t, err, "roll back")
	}
}
