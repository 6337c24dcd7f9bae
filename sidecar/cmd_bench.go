package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/mneme-memory/mneme/sidecar/bench"
	"github.com/mneme-memory/mneme/sidecar/cli"
)

func cmdBenchRetrieve(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("bench retrieve")
	o := bench.RetrieveOptions{Log: log}
	fs.IntVar(&o.Memories, "memories", 10000, "number of memories")
	fs.IntVar(&o.Conversations, "conversations", 1, "spread the memories over this many conversations")
	fs.IntVar(&o.Queries, "queries", 200, "timed queries per measurement")
	fs.StringVar(&o.Vector, "vector", "auto", "embedding variant: auto, pgvector or array")
	asJSON := fs.Bool("json", false, "print one JSON object")
	fs.BoolVar(&o.Keep, "keep", false, "keep the benchmark database (its name is logged)")
	fs.IntVar(&o.Tenants, "tenants", 0, "spread the conversations over this many tenants and time retrieve as an application role under row-level security (0: off)")
	fs.IntVar(&o.ContextEpisodes, "context-episodes", 500, "also time a 1,000-word mneme.context over a conversation of this many episodes (0: off)")
	fs.StringVar(&o.Reuse, "reuse", "", "re-measure a database kept by an earlier run with the same --memories and --conversations (migrates it, does not reload)")
	if err := cli.Parse(fs, args, false); err != nil {
		return err
	}
	if o.Memories < 10 || o.Conversations < 1 || o.Conversations > o.Memories || o.Queries < 1 || o.Tenants < 0 || o.Tenants > o.Conversations || o.ContextEpisodes < 0 {
		return fmt.Errorf("%w: need --memories >= 10, 1 <= --conversations <= memories, --queries >= 1, 0 <= --tenants <= conversations", cli.ErrUsage)
	}
	var err error
	if o.Server, err = bench.Server("retrieve"); err != nil {
		return err
	}
	res, err := bench.Retrieve(ctx, o)
	if errors.Is(err, bench.ErrReuseMismatch) {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	res.WriteTable(os.Stdout)
	return nil
}

func cmdBenchEvents(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("bench events")
	o := bench.EventsOptions{Log: log}
	transports := fs.String("transports", "replication,notify,poll", "comma-separated transports to measure")
	fs.IntVar(&o.Samples, "samples", 200, "latency samples per transport (one job per transaction, spaced by --gap)")
	fs.DurationVar(&o.Gap, "gap", 10*time.Millisecond, "pause between latency samples")
	fs.IntVar(&o.Jobs, "jobs", 5000, "jobs for the throughput run (enqueued in one transaction)")
	fs.IntVar(&o.Concurrency, "concurrency", 4, "runner concurrency")
	fs.DurationVar(&o.Sweep, "sweep", time.Second, "sweep interval (the poll transport's latency is about half of it)")
	asJSON := fs.Bool("json", false, "print JSON, one object per transport")
	if err := cli.Parse(fs, args, false); err != nil {
		return err
	}
	if o.Samples < 1 || o.Jobs < 1 || o.Concurrency < 1 || o.Sweep <= 0 {
		return fmt.Errorf("%w: --samples, --jobs, --concurrency and --sweep must be positive", cli.ErrUsage)
	}
	for _, tr := range strings.Split(*transports, ",") {
		tr = strings.TrimSpace(tr)
		if tr != "replication" && tr != "notify" && tr != "poll" {
			return fmt.Errorf("%w: transport %q: use replication, notify or poll", cli.ErrUsage, tr)
		}
		o.Transports = append(o.Transports, tr)
	}
	var err error
	if o.Server, err = bench.Server("events"); err != nil {
		return err
	}
	results, err := bench.Events(ctx, o)
	if err != nil {
		return err
	}
	if *asJSON {
		return jsonLines(results)
	}
	bench.WriteEventsTable(os.Stdout, o, results)
	return nil
}

func cmdBenchWriters(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("bench writers")
	o := bench.WritersOptions{Log: log}
	fs.IntVar(&o.Writers, "writers", 50, "concurrent connections calling mneme.add_message")
	fs.IntVar(&o.Messages, "messages", 40, "messages per writer")
	asJSON := fs.Bool("json", false, "print JSON, one object per run")
	if err := cli.Parse(fs, args, false); err != nil {
		return err
	}
	if o.Writers < 1 || o.Writers > 500 || o.Messages < 1 {
		return fmt.Errorf("%w: --writers must be 1 to 500 and --messages positive", cli.ErrUsage)
	}
	var err error
	if o.Server, err = bench.Server("writers"); err != nil {
		return err
	}
	results, err := bench.Writers(ctx, o)
	if err != nil {
		return err
	}
	if *asJSON {
		return jsonLines(results)
	}
	fmt.Printf("mneme bench writers: %d writers x %d messages, add_message without a time\n", o.Writers, o.Messages)
	bench.WriteWritersTable(os.Stdout, results)
	return nil
}

// jsonLines prints one JSON object per result.
func jsonLines[T any](results []T) error {
	enc := json.NewEncoder(os.Stdout)
	for _, r := range results {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}
