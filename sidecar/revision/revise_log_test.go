package revision

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// An ADD's log line names no target (it printed the zero uuid); the other
// actions name theirs.
func TestAppliedLogNamesTargetOnlyWhenThereIsOne(t *testing.T) {
	line := func(d Decision, applied string) string {
		var b bytes.Buffer
		slog.New(slog.NewTextHandler(&b, nil)).Info("revise: applied", appliedAttrs(d, applied, "heuristic", 2)...)
		return b.String()
	}
	add := line(Decision{Action: ActionAdd, Reason: "new information"}, ActionAdd)
	require.NotContains(t, add, "target=")
	require.NotContains(t, add, uuid.Nil.String())
	require.Contains(t, add, `decided=ADD applied=ADD reason="new information" classifier=heuristic candidates=2`)
	target := uuid.New()
	require.Contains(t, line(Decision{Action: ActionSupersede, Target: target}, ActionSupersede), "target="+target.String())
}
