package usage

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSettle(t *testing.T) {
	for _, c := range []struct {
		name     string
		in       Tokens
		usage    string
		prompt   int64
		complete int64
	}{
		{"reported", Tokens{Prompt: 10, Completion: 3, Reported: true, PromptChars: 400, CompletionChars: 8}, UsageReported, 10, 3},
		{"missing", Tokens{PromptChars: 401, CompletionChars: 8}, UsageMissing, 101, 2},
		{"negative", Tokens{Prompt: -1, Completion: 3, Reported: true, PromptChars: 4}, UsageInvalid, 1, 0},
		{"huge", Tokens{Prompt: MaxTokens + 1, Reported: true}, UsageInvalid, 0, 0},
	} {
		var call Call
		call.Settle(c.in)
		require.Equal(t, c.usage, call.Usage, c.name)
		require.Equal(t, c.prompt, call.PromptTokens, c.name)
		require.Equal(t, c.complete, call.CompletionTokens, c.name)
	}
}

func TestOutcomeAndEndpoint(t *testing.T) {
	require.Equal(t, OutcomeOK, Outcome(nil, false, false, false))
	require.Equal(t, OutcomeCanceled, Outcome(errors.New("x"), true, true, false))
	require.Equal(t, OutcomeTimeout, Outcome(context.DeadlineExceeded, false, false, false))
	require.Equal(t, OutcomeInvalidOutput, Outcome(errors.New("x"), false, false, true))
	require.Equal(t, OutcomeError, Outcome(errors.New("x"), false, false, false))
	require.Equal(t, "api.example.com:8443", Endpoint("https://user:secret@api.example.com:8443/v1?key=secret"))
	require.Equal(t, "", Endpoint("::not a url"))
}

// A call goes to the sink always and to the context's ledger when there
// is one, marked with the ledger's job; what the ledger's checks would
// refuse is fixed, not dropped.
func TestRecord(t *testing.T) {
	var seen []Call
	r := NewRecorder(func(_ context.Context, c Call) { seen = append(seen, c) })
	r.Record(context.Background(), Call{Call: CallChat, Purpose: "x", Model: "m"})
	require.Equal(t, NoJob, seen[0].JobKind)

	ctx, led := WithLedger(context.Background(), "segment", "acme")
	r.Record(ctx, Call{Call: CallChat, Purpose: "Bad Purpose!", Model: "", Retries: -2})
	(*Recorder)(nil).Record(ctx, Call{Call: CallEmbedding, Purpose: "embedding", Model: "e"})
	calls := led.Pending()
	require.Len(t, calls, 2)
	require.Equal(t, "segment", seen[1].JobKind)
	require.Equal(t, "acme", seen[1].Tenant)
	require.Equal(t, "other", calls[0].Purpose)
	require.Equal(t, "unknown", calls[0].Model)
	require.Zero(t, calls[0].Retries)
	led.Written(1)
	require.Len(t, led.Pending(), 1)
	led.Written(5)
	require.Empty(t, led.Pending())
	var none *Ledger
	require.Nil(t, none.Pending())
}
