package tests

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/eval/feedback"
	"github.com/mneme-memory/mneme/sidecar/pipeline"
)

// The feedback simulation (mneme-lab eval feedback), shortened: review-based
// updates learn to rank answers above lookalikes; auto-GOOD entrenches what
// it retrieved first; the run leaves the database as it was.
func TestFeedbackSimulation(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	p, err := pipeline.New(pipeline.Deps{Embedder: embed.NewHash(config.DefaultEmbedDim)})
	require.NoError(t, err)
	res, err := feedback.Run(context.Background(), db.Pool, p.Review, feedback.Options{Sessions: 30}, slog.New(slog.DiscardHandler))
	if dbtest.OnCitus() {
		require.ErrorContains(t, err, "eval feedback does not run on a distributed mneme (Citus)")
		return
	}
	require.NoError(t, err)
	require.Len(t, res.Points, 30)
	first, last := res.Points[0].Precision, res.Points[len(res.Points)-1].Precision
	require.Equal(t, first[feedback.AutoGood], first[feedback.Review], "same start")
	require.Equal(t, first[feedback.None], first[feedback.Review], "same start")
	mid := res.Points[res.NewAnswersAt-2].Precision // the session before new answers arrive
	require.Greater(t, mid[feedback.Review], first[feedback.Review], "review-based updates improve precision")
	require.Equal(t, first[feedback.AutoGood], mid[feedback.AutoGood], "auto-GOOD keeps what it retrieved first")
	require.Greater(t, last[feedback.Review], last[feedback.AutoGood])
	require.Greater(t, res.NoiseStability[feedback.AutoGood], res.NoiseStability[feedback.None], "auto-GOOD strengthens lookalikes")
	require.Less(t, res.NoiseStability[feedback.Review], res.NoiseStability[feedback.None], "reviews weaken them")

	var n int
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM mneme.memories`).Scan(&n))
	require.Zero(t, n, "the simulation rolls back")
}
