// Command mneme is the sidecar daemon and CLI of mneme, long-term memory for
// LLM agents inside PostgreSQL. The SQL functions are the product; this
// binary migrates the schema, runs the job pipelines that need an LLM,
// an embedder or FSRS, and hosts the benchmarks and evaluations.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// version is set by the Makefile through -ldflags.
var version = "dev"

// command is one subcommand: run gets the arguments after its name.
type command struct {
	summary string
	run     func(ctx context.Context, log *slog.Logger, args []string) error
}

var commands = map[string]command{
	"migrate": {"apply the embedded migrations and SQL layer to $DATABASE_URL", cmdMigrate},
	"version": {"print the version", cmdVersion},
	"cluster": {"start|stop|url|env a private PostgreSQL for the demo and tests", cmdCluster},
}

// errUsage makes main print usage and exit 2.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel()}))
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	name := os.Args[1]
	if name == "help" || name == "-h" || name == "--help" {
		usage()
		return
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "mneme: unknown command %q\n\n", name)
		usage()
		os.Exit(2)
	}
	if err := cmd.run(ctx, log, os.Args[2:]); err != nil {
		if errors.Is(err, errUsage) {
			fmt.Fprintf(os.Stderr, "mneme %s: %v\n", name, err)
			os.Exit(2)
		}
		fmt.Fprintf(os.Stderr, "mneme %s: %v\n", name, err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: mneme <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(os.Stderr, "\nconfiguration is read from the environment: see README.md")
}

func logLevel() slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(os.Getenv("MNEME_LOG_LEVEL"))); err != nil {
		return slog.LevelInfo
	}
	return l
}

func cmdVersion(_ context.Context, _ *slog.Logger, _ []string) error {
	fmt.Println("mneme", version)
	return nil
}
