package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/scratch"
)

// WritersOptions size `mneme bench writers`.
type WritersOptions struct {
	Server   string // DATABASE_URL: the scratch database is created on its server
	Writers  int    // concurrent connections
	Messages int    // messages per writer
	Log      *slog.Logger
}

// WritersResult is one run: every writer on one conversation, or each on
// its own.
type WritersResult struct {
	Conversations int     `json:"conversations"`
	Writers       int     `json:"writers"`
	Messages      int     `json:"messages"`
	Failures      int64   `json:"failures"`
	Seconds       float64 `json:"seconds"`
	PerSecond     float64 `json:"messages_per_sec"`
	SegmentJobs   int     `json:"segment_jobs"`
}

// Writers measures concurrent mneme.add_message without a time (the server
// clock, in arrival order): all writers on one conversation, then one
// conversation each.
func Writers(ctx context.Context, o WritersOptions) ([]WritersResult, error) {
	if o.Writers < 1 || o.Messages < 1 {
		return nil, fmt.Errorf("writers and messages must be positive")
	}
	db, err := scratch.Open(ctx, scratch.Options{Server: o.Server, Prefix: "mneme_bench_", Log: o.Log})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var out []WritersResult
	for _, shared := range []bool{true, false} {
		r, err := writeRun(ctx, db.Pool, o, shared)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

func writeRun(ctx context.Context, pool *pgxpool.Pool, o WritersOptions, shared bool) (WritersResult, error) {
	res := WritersResult{Conversations: o.Writers, Writers: o.Writers, Messages: o.Writers * o.Messages}
	convs := make([]uuid.UUID, o.Writers)
	one := uuid.New()
	for i := range convs {
		convs[i] = uuid.New()
		if shared {
			convs[i] = one
		}
	}
	if shared {
		res.Conversations = 1
	}
	var failures atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < o.Writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < o.Messages; i++ {
				if _, err := pool.Exec(ctx, `SELECT mneme.add_message($1, 'user', $2)`, convs[w],
					fmt.Sprintf("writer %d says message %d about the garden", w, i)); err != nil {
					if failures.Add(1) == 1 && o.Log != nil {
						o.Log.Warn("add_message failed", "err", err)
					}
				}
			}
		}(w)
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	res.Failures = failures.Load()
	res.PerSecond = float64(res.Messages-int(res.Failures)) / res.Seconds
	err := pool.QueryRow(ctx, `SELECT count(*) FROM mneme.jobs WHERE kind = 'segment' AND conversation_id = ANY ($1)`, convs).Scan(&res.SegmentJobs)
	return res, err
}

// WriteWritersTable prints the results for a person.
func WriteWritersTable(w io.Writer, o WritersOptions, results []WritersResult) {
	fmt.Fprintf(w, "mneme bench writers: %d writers x %d messages, add_message without a time\n", o.Writers, o.Messages)
	fmt.Fprintf(w, "  %-14s %8s %9s %9s %12s %13s\n", "conversations", "writers", "messages", "failures", "messages/s", "segment jobs")
	for _, r := range results {
		fmt.Fprintf(w, "  %-14d %8d %9d %9d %12.0f %13d\n", r.Conversations, r.Writers, r.Messages, r.Failures, r.PerSecond, r.SegmentJobs)
	}
}
