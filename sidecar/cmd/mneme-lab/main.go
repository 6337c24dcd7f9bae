// Command mneme-lab is mneme's laboratory beside the daemon (command
// mneme, ./sidecar): the benchmarks (package bench, soak), the evaluations
// (packages eval/...) and the private PostgreSQL clusters of the demo and
// the tests (package cluster, which may apt-get install PostgreSQL). None
// of them is linked into the daemon: make lint checks that
// `go list -deps ./sidecar` names none of these packages. Package main
// holds commands only: each parses its flags and calls a package.
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/version"
)

// commands is the one table of commands.
func commands() []cli.Command {
	return []cli.Command{
		{Name: "cluster", Args: "start|stop|url|env [flags]", Summary: "a private PostgreSQL for the demo and tests (default .mneme/pg)", Run: cmdCluster},
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
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cli.LogLevel(os.Getenv("MNEME_LOG_LEVEL"))}))
	code := cli.Main(ctx, log, "mneme-lab", version.Binary(), commands(), os.Args[1:])
	stop()
	os.Exit(code)
}

// flags is the flag set of the command at path; configuration is read from
// the environment (README.md), flags only choose what a command does.
func flags(path string) *flag.FlagSet { return cli.Flags(commands(), "mneme-lab", path) }
