// Command mneme is the sidecar daemon and CLI of mneme, long-term memory for
// LLM agents inside PostgreSQL. The SQL functions are the product; this
// binary migrates the schema, runs the job pipelines that need an LLM,
// an embedder or FSRS (package daemon), and serves the operator's commands
// (MCP, UI, export and import, psql). The benchmarks, evaluations, soak and
// private clusters are another command, mneme-lab (sidecar/cmd/mneme-lab),
// so this one links none of them (make lint checks it). Package main holds
// commands only: each parses its flags and calls a package.
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
		{Name: "psql", Args: "[psql arguments]", Summary: "open psql on $DATABASE_URL, or on the demo cluster", Run: cmdPsql},
		{Name: "slot", Args: "show|drop", Summary: "show or drop the replication slot ($MNEME_SLOT) of the replication transport", Run: cmdSlot},
		{Name: "reembed", Args: "[--dim N]", Summary: "change the embedding dimension and re-embed every memory", Run: cmdReembed},
		{Name: "vector-indexes", Args: "[--apply] [--json]", Summary: "pgvector: the HNSW indexes of large conversations and tenants (mneme.vector_index_plan), shown or made", Run: cmdVectorIndexes},
		{Name: "export", Args: "[--tenant T] [--conversation C ...] [--embeddings] [-o FILE]", Summary: "write a tenant's memory as versioned JSON Lines (docs/export.md)", Run: cmdExport},
		{Name: "import", Args: "[--tenant T] [--conversations keep|new] [--from mneme|mem0] FILE", Summary: "read an export (or mem0's exported memories) into a tenant", Run: cmdImport},
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
