package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/sidecar/migrate"
	"github.com/mneme-memory/mneme/sidecar/scratch"
	"github.com/mneme-memory/mneme/sidecar/transfer"
)

// TransferOptions configure mneme bench transfer.
type TransferOptions struct {
	Server        string
	Memories      int
	Conversations int
	Vector        string
	Embeddings    bool
	Gzip          bool
	DeferIndex    bool
	Keep          bool
	Log           *slog.Logger
}

// Bind binds mneme bench transfer's flags; it returns --json.
func (o *TransferOptions) Bind(fs *flag.FlagSet) *bool {
	fs.IntVar(&o.Memories, "memories", 100000, "memories in the exported tenant")
	fs.IntVar(&o.Conversations, "conversations", 100, "spread over this many conversations")
	fs.StringVar(&o.Vector, "vector", "auto", "embedding variant: auto, pgvector or array")
	fs.BoolVar(&o.Embeddings, "embeddings", false, "export (and import) the embeddings; without, import recomputes them")
	fs.BoolVar(&o.Gzip, "gzip", false, "gzip the file")
	fs.BoolVar(&o.DeferIndex, "defer-index", false, "import with --defer-index (pgvector: the HNSW index built once after the import)")
	fs.BoolVar(&o.Keep, "keep", false, "keep the two benchmark databases and the file (their names are logged)")
	return fs.Bool("json", false, "print one JSON object")
}

// Validate checks the bound flags.
func (o *TransferOptions) Validate() error {
	if o.Memories < 1 || o.Conversations < 1 || o.Conversations > o.Memories {
		return errors.New("need --memories >= 1 and 1 <= --conversations <= memories")
	}
	return validVector(o.Vector)
}

// TransferResult is one run: the export of a tenant of Memories memories
// into a file, and its import into a fresh database.
type TransferResult struct {
	Variant       string  `json:"variant"`
	Memories      int64   `json:"memories"`
	Conversations int     `json:"conversations"`
	Embeddings    bool    `json:"embeddings"`
	DeferIndex    bool    `json:"defer_index"`
	Lines         int64   `json:"lines"`
	FileMB        float64 `json:"file_mb"`
	ExportSeconds float64 `json:"export_seconds"`
	ExportRate    float64 `json:"export_memories_per_second"`
	ExportRSSMB   float64 `json:"export_peak_rss_mb"`
	ImportSeconds float64 `json:"import_seconds"`
	ImportRate    float64 `json:"import_memories_per_second"`
	ImportRSSMB   float64 `json:"import_peak_rss_mb"`
}

// Transfer loads a tenant, exports it to a temporary file and imports the
// file into a second database, timing both and reading this process's peak
// RSS (VmHWM, reset before each phase).
func Transfer(ctx context.Context, o TransferOptions) (TransferResult, error) {
	res := TransferResult{Conversations: o.Conversations, Embeddings: o.Embeddings, DeferIndex: o.DeferIndex}
	mo := migrate.Options{Vector: o.Vector}
	src, err := scratch.Open(ctx, scratch.Options{Server: o.Server, Prefix: "mneme_bench_", Keep: o.Keep, Log: o.Log, Migrate: mo})
	if err != nil {
		return res, err
	}
	defer src.Close()
	if err := src.Pool.QueryRow(ctx, `SELECT mneme.setting('vector_variant') #>> '{}'`).Scan(&res.Variant); err != nil {
		return res, err
	}
	o.Log.Info("bench transfer: loading", "memories", o.Memories, "conversations", o.Conversations, "variant", res.Variant)
	if err := loadTransfer(ctx, src.URL, o.Memories, o.Conversations); err != nil {
		return res, err
	}
	f, err := os.CreateTemp("", "mneme-bench-transfer-*.jsonl")
	if err != nil {
		return res, err
	}
	if o.Keep {
		o.Log.Warn("bench transfer: file kept", "file", f.Name())
	} else {
		defer os.Remove(f.Name()) //nolint:errcheck // a temporary file
	}
	defer f.Close()

	conn, err := pgx.Connect(ctx, src.URL)
	if err != nil {
		return res, err
	}
	resetPeakRSS()
	t0 := time.Now()
	st, err := transfer.Export(ctx, conn, f, transfer.ExportOptions{Embeddings: o.Embeddings, Gzip: o.Gzip, MnemeVersion: "bench"})
	conn.Close(ctx)
	if err != nil {
		return res, err
	}
	res.ExportSeconds = time.Since(t0).Seconds()
	res.ExportRSSMB = peakRSSMB()
	res.Memories, res.Lines = st.Memories, st.Lines
	res.ExportRate = float64(st.Memories) / res.ExportSeconds
	if fi, err := f.Stat(); err == nil {
		res.FileMB = float64(fi.Size()) / (1 << 20)
	}

	dst, err := scratch.Open(ctx, scratch.Options{Server: o.Server, Prefix: "mneme_bench_", Keep: o.Keep, Log: o.Log, Migrate: mo})
	if err != nil {
		return res, err
	}
	defer dst.Close()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return res, err
	}
	conn, err = pgx.Connect(ctx, dst.URL)
	if err != nil {
		return res, err
	}
	defer conn.Close(ctx)
	resetPeakRSS()
	t0 = time.Now()
	ir, err := transfer.Import(ctx, conn, f, transfer.ImportOptions{Settings: true, DeferIndex: o.DeferIndex, Log: o.Log})
	if err != nil {
		return res, err
	}
	res.ImportSeconds = time.Since(t0).Seconds()
	res.ImportRSSMB = peakRSSMB()
	res.ImportRate = float64(ir.Memories) / res.ImportSeconds
	return res, nil
}

// loadTransfer writes memories spread over conversations with plain
// inserts (their triggers compute BM25, embeddings and events).
func loadTransfer(ctx context.Context, url string, memories, conversations int) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		`INSERT INTO mneme.message_queue (id)
		 SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(c), 12, '0'))::uuid FROM generate_series(1, $2::int) c WHERE $1::int > 0`,
		`INSERT INTO mneme.memories (conversation_id, content, summary, label, created_at, last_reviewed_at)
		 SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(1 + i % $2::int), 12, '0'))::uuid,
		        format('Note %s: the %s %s near the %s on day %s.', i, w[1 + i % 7], w[8 + i % 5], w[13 + i % 6], i % 365),
		        format('the %s %s', w[1 + i % 7], w[8 + i % 5]), 'general',
		        now() - make_interval(secs => i), now() - make_interval(secs => i)
		 FROM generate_series(1, $1::int) i,
		      LATERAL (SELECT ARRAY['red', 'old', 'quiet', 'busy', 'green', 'small', 'late',
		                            'train', 'market', 'garden', 'meeting', 'concert',
		                            'river', 'station', 'school', 'bridge', 'office', 'harbour'] AS w) v`,
		`ANALYZE mneme.memories`,
	} {
		args := []any{memories, conversations}
		if !strings.Contains(q, "$1") {
			args = nil
		}
		if _, err := conn.Exec(ctx, q, args...); err != nil {
			return fmt.Errorf("load: %w", err)
		}
	}
	return nil
}

// resetPeakRSS resets the process's peak RSS (Linux: clear_refs 5); a
// no-op elsewhere.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSSMB is VmHWM, the process's peak resident set, in MB (0 if unknown).
func peakRSSMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// WriteTable prints the result.
func (r TransferResult) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "variant %s, %d memories in %d conversations, embeddings %v, defer index %v: %d lines, %.1f MB\n",
		r.Variant, r.Memories, r.Conversations, r.Embeddings, r.DeferIndex, r.Lines, r.FileMB)
	fmt.Fprintf(w, "%-8s %10s %14s %14s\n", "", "seconds", "memories/s", "peak RSS MB")
	fmt.Fprintf(w, "%-8s %10.1f %14.0f %14.1f\n", "export", r.ExportSeconds, r.ExportRate, r.ExportRSSMB)
	fmt.Fprintf(w, "%-8s %10.1f %14.0f %14.1f\n", "import", r.ImportSeconds, r.ImportRate, r.ImportRSSMB)
}
