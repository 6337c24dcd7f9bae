// Command mneme is the sidecar daemon and CLI of mneme, long-term memory for
// LLM agents inside PostgreSQL. The SQL functions are the product; this
// binary migrates the schema, runs the job pipelines that need an LLM,
// an embedder or FSRS (package daemon), and runs the benchmarks and
// evaluations (packages bench and eval/...). Package main holds commands
// only: each parses its flags and calls a package.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/version"
)

// commands is the one table of commands.
func commands() []cli.Command {
	return []cli.Command{
		{Name: "migrate", Args: "[--citus]", Summary: "apply the embedded migrations and SQL layer to $DATABASE_URL", Run: cmdMigrate},
		{Name: "run", Args: "[--drain]", Summary: "run the sidecar: job runner, event transport, /healthz and /metrics", Run: cmdRun},
		{Name: "cluster", Args: "start|stop|url|env [flags]", Summary: "a private PostgreSQL for the demo and tests (default .mneme/pg)", Run: cmdCluster},
		{Name: "psql", Args: "[psql arguments]", Summary: "open psql on $DATABASE_URL, or on the demo cluster", Run: cmdPsql},
		{Name: "slot", Args: "show|drop", Summary: "show or drop the replication slot ($MNEME_SLOT) of the replication transport", Run: cmdSlot},
		{Name: "reembed", Args: "[--dim N]", Summary: "change the embedding dimension and re-embed every memory", Run: cmdReembed},
		{Name: "vector-indexes", Args: "[--apply] [--json]", Summary: "pgvector: the HNSW indexes of large conversations and tenants (mneme.vector_index_plan), shown or made", Run: cmdVectorIndexes},
		{Name: "export", Args: "[--tenant T] [--conversation C ...] [--embeddings] [-o FILE]", Summary: "write a tenant's memory as versioned JSON Lines (docs/export.md)", Run: cmdExport},
		{Name: "import", Args: "[--tenant T] [--conversations keep|new] [--from mneme|mem0] FILE", Summary: "read an export (or mem0's exported memories) into a tenant", Run: cmdImport},
		{Name: "bench", Args: "<name> [flags]", Summary: "run a benchmark", Subs: []cli.Command{
			{Name: "retrieve", Args: "[flags]", Summary: "latency of mneme.retrieve (k=10) beside bare vector and BM25 top-10", Run: cmdBenchRetrieve},
			{Name: "events", Args: "[flags]", Summary: "per transport: commit-to-handler latency and jobs/s with a no-op handler", Run: cmdBenchEvents},
			{Name: "writers", Args: "[flags]", Summary: "concurrent add_message on one conversation and on many: messages/s and failures", Run: cmdBenchWriters},
			{Name: "scale", Args: "[flags]", Summary: "every call at 10,000 to 1,000,000 memories over 10,000 conversations and 1,000 tenants, as mneme_app: latency, size, goals", Run: cmdBenchScale},
			{Name: "erase", Args: "[flags]", Summary: "mneme.erase and erase_conversation in a loaded tenant (memories, review log, jobs): latency", Run: cmdBenchErase},
			{Name: "transfer", Args: "[flags]", Summary: "mneme export and import of a loaded tenant: memories/s and peak RSS of each", Run: cmdBenchTransfer},
			{Name: "ingest", Args: "[flags]", Summary: "conversations written at once with sidecars running: sustained messages/s and segmentation lag", Run: cmdBenchIngest},
			{Name: "soak", Args: "[flags]", Summary: "live traffic, sidecars killed and restarted, then the invariants checked (pass/fail, exit 1 on a failure) and throughput", Run: cmdBenchSoak},
		}},
		{Name: "eval", Args: "<name> [flags]", Summary: "run an evaluation", Subs: []cli.Command{
			{Name: "locomo", Args: "[flags]", Summary: "evidence recall on LoCoMo at a context budget, beside baselines", Run: cmdEvalLocomo},
			{Name: "beam", Args: "[flags]", Summary: "evidence recall on BEAM, knowledge updates and contradictions, beside baselines", Run: cmdEvalBeam},
			{Name: "feedback", Args: "[flags]", Summary: "review-based vs auto-GOOD vs no reinforcement: precision@5 over simulated sessions", Run: cmdEvalFeedback},
			{Name: "lifecycle", Args: "[flags]", Summary: "a simulated year of use: share of memories active, inactive and purged per label", Run: cmdEvalLifecycle},
			{Name: "qa", Args: "--data PATH --llm [flags]", Summary: "answer accuracy per category: a model (MNEME_LLM_*) answers benchmark questions from mneme.context and judges the answers", Run: cmdEvalQA},
			{Name: "revision", Args: "[flags]", Summary: "belief revision on scripted conversations: per action precision and recall, current value first", Run: cmdEvalRevision},
		}},
		{Name: "mcp", Args: "[--transport stdio|http]", Summary: "serve the memory tools to agents over the Model Context Protocol", Run: cmdMCP},
		{Name: "ui", Args: "[--addr 127.0.0.1:8420]", Summary: "web pages to look into the memory: conversations, memories, lineage, reviews, search, jobs", Run: cmdUI},
		{Name: "version", Summary: "print the binary's version, the SQL API's it speaks and, with DATABASE_URL set, the database's", Run: cmdVersion},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cli.LogLevel(os.Getenv("MNEME_LOG_LEVEL"))}))
	code := cli.Main(ctx, log, "mneme", version.Binary(), commands(), os.Args[1:])
	stop()
	os.Exit(code)
}

// flags is the flag set of the command at path; configuration is read from
// the environment (README.md), flags only choose what a command does.
func flags(path string) *flag.FlagSet { return cli.Flags(commands(), "mneme", path) }

// cmdVersion prints the binary's version and the SQL API's it speaks
// (and migrates to); with DATABASE_URL set, also the database's, and
// whether this binary may run against it (the sidecar's start check). As
// every command, it uses the demo cluster when DATABASE_URL is unset.
func cmdVersion(ctx context.Context, log *slog.Logger, args []string) error {
	if err := cli.Parse(flags("version"), args, false); err != nil {
		return err
	}
	fmt.Println("mneme", version.Binary())
	fmt.Println("SQL API", version.SQLAPI(), "(spoken and migrated to by this binary)")
	if err := useDemoCluster(ctx, log); err != nil {
		return err
	}
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		return nil
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	db, err := version.Check(ctx, conn)
	if db == "" {
		return err
	}
	fmt.Println("database SQL API", db, "(DATABASE_URL)")
	return err
}
