package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/sidecar/embed"
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
	Jobs          int
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
	fs.IntVar(&o.Jobs, "jobs", runtime.NumCPU(), "import with --jobs (conversations written at once)")
	fs.BoolVar(&o.Keep, "keep", false, "keep the two benchmark databases and the file (their names are logged)")
	return fs.Bool("json", false, "print one JSON object")
}

// Validate checks the bound flags.
func (o *TransferOptions) Validate() error {
	if o.Jobs < 1 {
		return errors.New("need --jobs >= 1")
	}
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
	Jobs          int     `json:"jobs"`
	Lines         int64   `json:"lines"`
	FileMB        float64 `json:"file_mb"`
	ExportSeconds float64 `json:"export_seconds"`
	ExportRate    float64 `json:"export_memories_per_second"`
	ExportRSSMB   float64 `json:"export_peak_rss_mb"`
	ImportSeconds float64 `json:"import_seconds"`
	ImportRate    float64 `json:"import_memories_per_second"`
	ImportRSSMB   float64 `json:"import_peak_rss_mb"`
	// CPU seconds of the server's cluster during the phase (its backends,
	// the import's several connections, and its background processes; 0
	// when the server is not on this machine) and of this process: where
	// the time went.
	ExportServerCPU float64 `json:"export_server_cpu_seconds"`
	ExportClientCPU float64 `json:"export_client_cpu_seconds"`
	ImportServerCPU float64 `json:"import_server_cpu_seconds"`
	ImportClientCPU float64 `json:"import_client_cpu_seconds"`
	LoadAverage     string  `json:"load_average"` // /proc/loadavg's 1-minute figure at the start and the end
}

// Transfer loads a tenant, exports it to a temporary file and imports the
// file into a second database, timing both and reading this process's peak
// RSS (VmHWM, reset before each phase).
func Transfer(ctx context.Context, o TransferOptions) (TransferResult, error) {
	res := TransferResult{Conversations: o.Conversations, Embeddings: o.Embeddings, DeferIndex: o.DeferIndex, Jobs: o.Jobs}
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
	debug.FreeOSMemory() // the load's rows are garbage: not part of the export's peak
	load0 := loadAverage()
	cpu := startCPU(ctx, conn)
	resetPeakRSS()
	t0 := time.Now()
	st, err := transfer.Export(ctx, conn, f, transfer.ExportOptions{Embeddings: o.Embeddings, Gzip: o.Gzip, MnemeVersion: "bench"})
	res.ExportServerCPU, res.ExportClientCPU = cpu.stop()
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
	cpu = startCPU(ctx, conn)
	resetPeakRSS()
	t0 = time.Now()
	ir, err := transfer.Import(ctx, conn, f, transfer.ImportOptions{Settings: true, DeferIndex: o.DeferIndex, Jobs: o.Jobs, Log: o.Log})
	if err != nil {
		return res, err
	}
	res.ImportServerCPU, res.ImportClientCPU = cpu.stop()
	res.LoadAverage = load0 + " to " + loadAverage()
	res.ImportSeconds = time.Since(t0).Seconds()
	res.ImportRSSMB = peakRSSMB()
	res.ImportRate = float64(ir.Memories) / res.ImportSeconds
	return res, nil
}

// loadTransfer writes memories spread over conversations: COPY into a
// staging table, then one INSERT per 10,000 memories, so every trigger
// runs as for any write (BM25, the array variant's normalisation, events).
// The built-in embeddings are computed here (the hash trigger's PL/pgSQL
// takes a millisecond a row: 1,000,000 memories would load for hours).
func loadTransfer(ctx context.Context, url string, memories, conversations int) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var dim int
	if err := conn.QueryRow(ctx, `SELECT (mneme.setting('embedding_dim') #>> '{}')::int`).Scan(&dim); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	for _, q := range []string{
		`INSERT INTO mneme.message_queue (id)
		 SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(c), 12, '0'))::uuid FROM generate_series(1, $1::int) c`,
		`CREATE TEMP TABLE bench_load (conversation_id uuid, content text, summary text, created_at timestamptz, embedding real[])`,
	} {
		var args []any
		if strings.Contains(q, "$1") {
			args = []any{conversations}
		}
		if _, err := conn.Exec(ctx, q, args...); err != nil {
			return fmt.Errorf("load: %w", err)
		}
	}
	w := []string{"red", "old", "quiet", "busy", "green", "small", "late",
		"train", "market", "garden", "meeting", "concert",
		"river", "station", "school", "bridge", "office", "harbour"}
	h := embed.NewHash(dim)
	now := time.Now()
	const chunk = 10000
	for from := 1; from <= memories; from += chunk {
		to := min(from+chunk-1, memories)
		rows := make([][]any, 0, to-from+1)
		for i := from; i <= to; i++ {
			content := fmt.Sprintf("Note %d: the %s %s near the %s on day %d.", i, w[i%7], w[7+i%5], w[12+i%6], i%365)
			summary := fmt.Sprintf("the %s %s", w[i%7], w[7+i%5])
			vec, err := h.EmbedOne(embed.MemoryText("", summary, content))
			if err != nil {
				return fmt.Errorf("load: embed: %w", err)
			}
			conv, err := uuid.Parse(fmt.Sprintf("00000000-0000-4000-8000-%012x", 1+i%conversations))
			if err != nil {
				return err
			}
			rows = append(rows, []any{conv, content, summary, now.Add(-time.Duration(i) * time.Second), vec})
		}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{"bench_load"},
			[]string{"conversation_id", "content", "summary", "created_at", "embedding"}, pgx.CopyFromRows(rows)); err != nil {
			return fmt.Errorf("load: copy: %w", err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO mneme.memories (conversation_id, content, summary, label, created_at, last_reviewed_at, embedding)
			SELECT conversation_id, content, summary, 'general', created_at, created_at, embedding FROM bench_load;
			TRUNCATE bench_load`); err != nil {
			return fmt.Errorf("load: %w", err)
		}
	}
	if _, err := conn.Exec(ctx, `ANALYZE mneme.memories`); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	return nil
}

// phaseCPU measures a phase's CPU: the server's (read from /proc when the
// server runs on this machine) and this process's. The server's is its
// whole cluster's: the postmaster's children, the ones that ended during
// the phase included (the kernel adds a child's time to its parent's
// cutime and cstime when it is reaped), so an import's several
// connections count, and the background writers with them.
type phaseCPU struct {
	postmaster     int
	server, client float64
}

func startCPU(ctx context.Context, conn *pgx.Conn) phaseCPU {
	var p phaseCPU
	var pid int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err == nil {
		if f, ok := procStat(pid); ok && len(f) > 1 {
			p.postmaster, _ = strconv.Atoi(f[1])
			p.server, _ = clusterCPU(p.postmaster)
		}
	}
	p.client = selfCPU()
	return p
}

// stop returns the server's and this process's CPU seconds since start.
func (p phaseCPU) stop() (server, client float64) {
	if s, ok := clusterCPU(p.postmaster); ok {
		server = s - p.server
	}
	return server, selfCPU() - p.client
}

// procStat is /proc/<pid>/stat's fields after the command name (state,
// ppid, ...; utime is [11]).
func procStat(pid int) ([]string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil, false
	}
	f := strings.Fields(string(b[i+1:]))
	return f, len(f) >= 15
}

// clusterCPU is the CPU seconds of a postmaster, of its children alive, and
// of its children ended and reaped.
func clusterCPU(postmaster int) (float64, bool) {
	if postmaster <= 0 {
		return 0, false
	}
	f, ok := procStat(postmaster)
	if !ok {
		return 0, false
	}
	ticks := 0.0
	for _, x := range f[11:15] { // utime, stime, cutime, cstime
		v, _ := strconv.ParseFloat(x, 64)
		ticks += v
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	parent := strconv.Itoa(postmaster)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if c, ok := procStat(pid); ok && c[1] == parent {
			for _, x := range c[11:13] {
				v, _ := strconv.ParseFloat(x, 64)
				ticks += v
			}
		}
	}
	return ticks / clockTicks, true
}

// selfCPU is this process's user + system CPU seconds so far.
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// loadAverage is /proc/loadavg's one-minute figure ("" elsewhere).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return ""
	}
	return f[0]
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
	fmt.Fprintf(w, "variant %s, %d memories in %d conversations, embeddings %v, defer index %v, import jobs %d: %d lines, %.1f MB\n",
		r.Variant, r.Memories, r.Conversations, r.Embeddings, r.DeferIndex, r.Jobs, r.Lines, r.FileMB)
	fmt.Fprintf(w, "%-8s %10s %14s %14s %12s %12s\n", "", "seconds", "memories/s", "peak RSS MB", "server CPU s", "client CPU s")
	fmt.Fprintf(w, "%-8s %10.1f %14.0f %14.1f %12.1f %12.1f\n", "export", r.ExportSeconds, r.ExportRate, r.ExportRSSMB,
		r.ExportServerCPU, r.ExportClientCPU)
	fmt.Fprintf(w, "%-8s %10.1f %14.0f %14.1f %12.1f %12.1f\n", "import", r.ImportSeconds, r.ImportRate, r.ImportRSSMB,
		r.ImportServerCPU, r.ImportClientCPU)
	fmt.Fprintf(w, "load average %s\n", r.LoadAverage)
}
