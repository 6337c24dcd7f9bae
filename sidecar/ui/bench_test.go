package ui

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

// BenchmarkConversationPage: the page of a conversation of 500 episodes
// (2,000 messages, a session gap every 5 episodes, 500 memories), served
// end to end on the server (the reads, the grouping, the template) as the
// admin login; p50 and p95 per page are reported (goal: p50 at most 50 ms).
//
//	go test -run '^$' -bench BenchmarkConversationPage -benchtime 100x ./sidecar/ui
func BenchmarkConversationPage(b *testing.B) {
	ctx := context.Background()
	db := dbtest.New(b)
	conv := uuid.New()
	start := time.Now()
	_, err := db.Pool.Exec(ctx, `SELECT count(mneme.add_message($1, CASE WHEN i % 2 = 0 THEN 'user' ELSE 'assistant' END,
	        format('Message %s of the long conversation: we talked about the trip, the museum, the borrow checker and what to cook on Sunday (%s).', i, md5(i::text)),
	        now() - interval '30 days' + i * interval '1 minute' + (i / 20) * interval '1 hour'))
	        FROM generate_series(0, 1999) i`, conv)
	require.NoError(b, err)
	_, err = db.Pool.Exec(ctx, `SELECT count(mneme.create_episode($1,
	        ARRAY(SELECT m.id FROM mneme.messages m WHERE m.conversation_id = $1 ORDER BY m.id OFFSET e * 4 LIMIT 4),
	        format('Episode %s: the trip, the museum and Sunday''s cooking', e), format('Episode %s summary', e), NULL, 0.2, NULL, false, NULL, NULL))
	        FROM generate_series(0, 499) e`, conv)
	require.NoError(b, err)
	b.Logf("seeded 500 episodes in %s", time.Since(start).Round(time.Millisecond))
	admin, _ := db.PoolAs(b, "mneme_admin")
	s, err := New(ctx, Options{Pool: admin})
	require.NoError(b, err)
	h := s.Handler()
	get := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/conversations/"+conv.String(), nil))
		return rec
	}
	rec := get()
	require.Equal(b, http.StatusOK, rec.Code)
	require.Equal(b, 5, strings.Count(rec.Body.String(), `<div class="episode"`), "a session's episodes on the page")
	require.Equal(b, 100, strings.Count(rec.Body.String(), `class="session"`), "a session gap every 5 episodes")
	size := rec.Body.Len()
	for range 3 {
		get() // warm the connections and plans
	}
	d := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if rec := get(); rec.Code != http.StatusOK {
			b.Fatalf("status %d", rec.Code)
		}
		d = append(d, time.Since(t0))
	}
	b.StopTimer()
	// The reads and the grouping alone (the rest is the template).
	reads := make([]time.Duration, 0, b.N)
	req := httptest.NewRequest(http.MethodGet, "/conversations/"+conv.String(), nil)
	for range b.N {
		t0 := time.Now()
		_, _, err := s.conversation(ctx, req, conv, 1, 0)
		require.NoError(b, err)
		reads = append(reads, time.Since(t0))
	}
	b.ReportMetric(p50ms(d), "p50-ms")
	b.ReportMetric(ms(d, 95), "p95-ms")
	b.ReportMetric(p50ms(reads), "reads-p50-ms")
	b.ReportMetric(float64(size), "page-bytes")
}

func ms(d []time.Duration, pct int) float64 {
	d = slices.Clone(d)
	slices.Sort(d)
	return float64(d[len(d)*pct/100].Microseconds()) / 1000
}

func p50ms(d []time.Duration) float64 { return ms(d, 50) }
