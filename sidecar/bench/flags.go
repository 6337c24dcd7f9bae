package bench

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Bind binds mneme bench retrieve's flags; it returns --json.
func (o *RetrieveOptions) Bind(fs *flag.FlagSet) *bool {
	fs.IntVar(&o.Memories, "memories", 10000, "number of memories")
	fs.IntVar(&o.Conversations, "conversations", 1, "spread the memories over this many conversations")
	fs.IntVar(&o.Queries, "queries", 200, "timed queries per measurement")
	fs.StringVar(&o.Vector, "vector", "auto", "embedding variant: auto, pgvector or array")
	asJSON := fs.Bool("json", false, "print one JSON object")
	fs.BoolVar(&o.Keep, "keep", false, "keep the benchmark database (its name is logged)")
	fs.IntVar(&o.Tenants, "tenants", 0, "spread the conversations over this many tenants and time retrieve as an application role under row-level security (0: off)")
	fs.IntVar(&o.ContextEpisodes, "context-episodes", 500, "also time a 1,000-word mneme.context over a conversation of this many episodes (0: off)")
	fs.StringVar(&o.Reuse, "reuse", "", "re-measure a database kept by an earlier run with the same --memories and --conversations (migrates it, does not reload)")
	fs.BoolVar(&o.Citus, "citus", false, "DATABASE_URL is a Citus coordinator: the benchmark database is created on every node and distributed (migrate --citus; one tenant, so not with --tenants)")
	return asJSON
}

// Validate checks the bound flags.
func (o *RetrieveOptions) Validate() error {
	if o.Memories < 10 || o.Conversations < 1 || o.Conversations > o.Memories || o.Queries < 1 || o.Tenants < 0 ||
		o.Tenants > o.Conversations || o.ContextEpisodes < 0 {
		return errors.New("need --memories >= 10, 1 <= --conversations <= memories, --queries >= 1, 0 <= --tenants <= conversations, --context-episodes >= 0")
	}
	if o.Citus && (o.Tenants > 0 || o.Reuse != "") {
		return errors.New("--citus takes neither --tenants (one tenant on Citus) nor --reuse")
	}
	return validVector(o.Vector)
}

// validVector checks --vector.
func validVector(v string) error {
	switch v {
	case "auto", "pgvector", "array":
		return nil
	}
	return fmt.Errorf("--vector %q: use auto, pgvector or array", v)
}

// Bind binds mneme bench events' flags; it returns --transports and --json.
func (o *EventsOptions) Bind(fs *flag.FlagSet) (*string, *bool) {
	transports := fs.String("transports", "replication,notify,poll", "comma-separated transports to measure")
	fs.IntVar(&o.Samples, "samples", 200, "latency samples per transport (one job per transaction, spaced by --gap)")
	fs.DurationVar(&o.Gap, "gap", 10*time.Millisecond, "pause between latency samples")
	fs.IntVar(&o.Jobs, "jobs", 5000, "jobs for the throughput run (enqueued in one transaction)")
	fs.IntVar(&o.Concurrency, "concurrency", 4, "runner concurrency")
	fs.DurationVar(&o.Sweep, "sweep", time.Second, "sweep interval (the poll transport's latency is about half of it)")
	return transports, fs.Bool("json", false, "print JSON, one object per transport")
}

// Validate checks the bound flags and sets Transports.
func (o *EventsOptions) Validate(transports string) error {
	if o.Samples < 1 || o.Jobs < 1 || o.Concurrency < 1 || o.Sweep <= 0 {
		return errors.New("--samples, --jobs, --concurrency and --sweep must be positive")
	}
	for _, tr := range strings.Split(transports, ",") {
		tr = strings.TrimSpace(tr)
		if tr != "replication" && tr != "notify" && tr != "poll" {
			return fmt.Errorf("transport %q: use replication, notify or poll", tr)
		}
		o.Transports = append(o.Transports, tr)
	}
	return nil
}

// Bind binds mneme bench writers' flags; it returns --json.
func (o *WritersOptions) Bind(fs *flag.FlagSet) *bool {
	fs.IntVar(&o.Writers, "writers", 50, "concurrent connections calling mneme.add_message")
	fs.IntVar(&o.Messages, "messages", 40, "messages per writer")
	return fs.Bool("json", false, "print JSON, one object per run")
}

// Validate checks the bound flags.
func (o *WritersOptions) Validate() error {
	if o.Writers < 1 || o.Writers > 500 || o.Messages < 1 {
		return errors.New("--writers must be 1 to 500 and --messages positive")
	}
	return nil
}

// Bind binds mneme bench ingest's flags; it returns --conversations and --json.
func (o *IngestOptions) Bind(fs *flag.FlagSet) (*string, *bool) {
	convs := fs.String("conversations", "100,1000", "comma-separated conversation counts, one run each (each written at once)")
	fs.DurationVar(&o.Duration, "duration", 30*time.Second, "how long the writers write in each run")
	fs.IntVar(&o.Sidecars, "sidecars", 2, "sidecars (as mneme run) serving the database")
	fs.IntVar(&o.Concurrency, "concurrency", 2, "jobs each sidecar runs at once")
	fs.IntVar(&o.Preload, "preload", 0, "memories stored in bulk before the runs, in 1,000 other conversations (e.g. 1000000)")
	fs.IntVar(&o.Rate, "rate", 0, "messages per second the writers aim at together (0: as fast as add_message takes them)")
	fs.IntVar(&o.Writers, "writers", 0, "connections the writers (one per conversation, at most 200) share (0: at --rate one per 50 messages/s, at least 4; without a rate one per writer)")
	fs.StringVar(&o.Vector, "vector", "auto", "embedding variant: auto, pgvector or array")
	fs.BoolVar(&o.Keep, "keep", false, "keep the benchmark database (its name is logged)")
	fs.StringVar(&o.LLM, "llm", "off", "off (offline pipelines) or fake (the LLM pipelines against an in-process fake model: reports LLM calls and tokens per 1,000 messages)")
	return convs, fs.Bool("json", false, "print JSON, one object per run")
}

// Validate checks the bound flags and sets Conversations.
func (o *IngestOptions) Validate(convs string) error {
	if o.Duration <= 0 || o.Sidecars < 1 || o.Sidecars > 16 || o.Concurrency < 1 || o.Preload < 0 || o.Rate < 0 ||
		o.Writers < 0 || o.Writers > 200 {
		return errors.New("--duration must be positive, --sidecars 1 to 16, --concurrency positive, --preload and --rate 0 or more, --writers 0 to 200")
	}
	if err := validVector(o.Vector); err != nil {
		return err
	}
	if o.LLM != "off" && o.LLM != "fake" {
		return fmt.Errorf("--llm %q: want off or fake", o.LLM)
	}
	for _, s := range strings.Split(convs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 100000 {
			return fmt.Errorf("--conversations %q: want counts from 1 to 100000, comma-separated", s)
		}
		o.Conversations = append(o.Conversations, n)
	}
	return nil
}

// Bind binds mneme bench scale's flags; it returns --sizes and --json.
func (o *ScaleOptions) Bind(fs *flag.FlagSet) (*string, *bool) {
	sizes := fs.String("sizes", "10000,100000,1000000", "comma-separated database sizes in memories, ascending: the database grows to each in turn")
	fs.StringVar(&o.DB, "db", "mneme_bench_scale", "the benchmark database on DATABASE_URL's server: created if missing, grown, kept for the next run")
	fs.IntVar(&o.Conversations, "conversations", 10000, "conversations the memories are spread over (three hold 5% each)")
	fs.IntVar(&o.Tenants, "tenants", 1000, "tenants the conversations belong to")
	fs.IntVar(&o.Queries, "queries", 50, "timed queries per call and conversation at each size")
	fs.BoolVar(&o.Fresh, "fresh", false, "drop the benchmark database first")
	fs.BoolVar(&o.Citus, "citus", false, "DATABASE_URL is a Citus coordinator: the benchmark database is a scratch database on every node, distributed (migrate --citus) and dropped afterwards (--db and --fresh do not apply)")
	fs.StringVar(&o.Plot, "plot", "", "write an SVG plot of p50 against the database's size to this file")
	fs.StringVar(&o.Vector, "vector", "auto", "embedding variant of a new benchmark database: auto, pgvector or array (a kept database keeps its own)")
	fs.StringVar(&o.Embedder, "embedder", "hash", "the database's embedder for the run: hash, or external (every call passes the query's embedding, made as --vectors says; pgvector then searches large scopes through their own HNSW indexes)")
	fs.StringVar(&o.Vectors, "vectors", "hash", "the vectors stored and queried with: hash (the hash embedder's, a query's computed in SQL; sparse and near-orthogonal, so HNSW's recall on them is not a model's) or clustered (with --embedder external only: made in Go, shaped like a model's as in docs/experiments/ann-recall.sql, each passed as a parameter); a kept database keeps its own")
	fs.IntVar(&o.IngestRate, "ingest-rate", 2000, "the ingest row: messages/s the writers aim at (bench ingest on a scratch database of the same server, 2 sidecars x 2 jobs, after the sizes); 0 skips it (its goals n/a)")
	fs.DurationVar(&o.IngestDuration, "ingest-duration", 60*time.Second, "the ingest row: how long the writers write")
	fs.IntVar(&o.IngestConversations, "ingest-conversations", 200, "the ingest row: conversations written at once")
	return sizes, fs.Bool("json", false, "print one JSON object")
}

// Validate checks the bound flags and sets Sizes.
func (o *ScaleOptions) Validate(sizes string) error {
	if o.Conversations < 4 || o.Tenants < 2 || o.Tenants > o.Conversations || o.Queries < 1 || o.DB == "" {
		return errors.New("--conversations must be at least 4, --tenants 2 to conversations, --queries positive, --db a name")
	}
	if err := validVector(o.Vector); err != nil {
		return err
	}
	if o.IngestRate < 0 || (o.IngestRate > 0 && (o.IngestDuration <= 0 || o.IngestConversations < 1)) {
		return errors.New("--ingest-rate must be 0 (skip) or positive, with a positive --ingest-duration and --ingest-conversations")
	}
	if o.Embedder != "hash" && o.Embedder != "external" {
		return fmt.Errorf("--embedder %q: want hash or external", o.Embedder)
	}
	if o.Vectors != "hash" && o.Vectors != "clustered" {
		return fmt.Errorf("--vectors %q: want hash or clustered", o.Vectors)
	}
	if o.Vectors == "clustered" && o.Embedder != "external" {
		return errors.New("--vectors clustered needs --embedder external (the hash embedder embeds every query itself, with hash vectors)")
	}
	prev := 0
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= prev || n < 2000 || n > 10000000 {
			return fmt.Errorf("--sizes %q: want ascending sizes from 2,000 to 10,000,000 memories", sizes)
		}
		o.Sizes = append(o.Sizes, n)
		prev = n
	}
	return nil
}
