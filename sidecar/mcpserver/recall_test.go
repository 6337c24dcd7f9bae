package mcpserver

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// TestRecallDependsOnTheSidecar: what recall returns depends on whether
// the sidecar's jobs ran, not on when (the README's MCP section). The
// README's conversation: six messages of one session, a seventh two days
// later. Before segmentation nothing comes back; with every job run as
// soon as it is queued (a sidecar keeping up) and with the jobs run after
// the last message, the episode is the whole session (issue 37: a check
// used to cut it after its fourth turn when the sidecar kept up).
func TestRecallDependsOnTheSidecar(t *testing.T) {
	lines := [][2]string{{"user", "I started learning the violin last month"}, {"assistant", "How are the lessons going?"},
		{"user", "My teacher Anna says my bowing is too stiff"}, {"assistant", "Loose wrists help; try slow open strings"},
		{"user", "The recital is planned for the spring"}, {"assistant", "Good luck with the recital!"}}
	day := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	recallAfter := func(keepUp bool) (before, after string) {
		db := dbtest.New(t)
		cs := connect(t, Options{Pool: appPool(t, db)})
		conv := uuid.NewString()
		add := func(role, content string, at time.Time) {
			require.Empty(t, call(t, cs, "add_message", map[string]any{"conversation_id": conv, "role": role, "content": content,
				"at": at.Format(time.RFC3339)}, nil))
			if keepUp {
				drain(t, db)
			}
		}
		for i, l := range lines {
			add(l[0], l[1], day.Add(time.Duration(i)*time.Minute))
		}
		add("user", "Back again, hello", day.Add(48*time.Hour))
		recall := func() string {
			var rec RecallOut
			require.Empty(t, call(t, cs, "recall", map[string]any{"conversation_id": conv, "query": "what is my violin teacher called?",
				"budget": 80}, &rec))
			return rec.Context
		}
		before = recall()
		drain(t, db)
		return before, recall()
	}

	before, whole := recallAfter(false)
	require.Empty(t, before, "queued messages are not memories yet")
	require.Equal(t, "### 2026-03-01\n"+
		"user: I started learning the violin last month\nassistant: How are the lessons going?\n"+
		"user: My teacher Anna says my bowing is too stiff\nassistant: Loose wrists help; try slow open strings\n"+
		"user: The recital is planned for the spring\n\n- User: My teacher Anna says my bowing is too stiff.\n\n"+
		"- User: I started learning the violin last month.", whole)
	require.Len(t, strings.Fields(whole), 62)

	_, early := recallAfter(true)
	require.Equal(t, whole, early, "a sidecar keeping up stores the same episode")
}
