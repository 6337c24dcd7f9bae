package main

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
)

// Command groups with sub-subcommands. Each benchmark or evaluation adds
// itself from its own file: func init() { benchCommands["retrieve"] = ... }.
var (
	benchCommands = map[string]command{}
	evalCommands  = map[string]command{}
)

func init() {
	commands["bench"] = command{"run a benchmark: mneme bench <name> (see mneme bench help)", group("bench", benchCommands)}
	commands["eval"] = command{"run an evaluation: mneme eval <name> (see mneme eval help)", group("eval", evalCommands)}
}

func group(name string, subs map[string]command) func(context.Context, *slog.Logger, []string) error {
	return func(ctx context.Context, log *slog.Logger, args []string) error {
		names := make([]string, 0, len(subs))
		for n := range subs {
			names = append(names, n)
		}
		sort.Strings(names)
		if len(args) == 0 || args[0] == "help" || args[0] == "-h" {
			var b strings.Builder
			for _, n := range names {
				fmt.Fprintf(&b, "\n  %-10s %s", n, subs[n].summary)
			}
			return fmt.Errorf("%w: mneme %s <name> [flags]%s", errUsage, name, b.String())
		}
		sub, ok := subs[args[0]]
		if !ok {
			return fmt.Errorf("%w: unknown %s %q (have: %s)", errUsage, name, args[0], strings.Join(names, ", "))
		}
		return sub.run(ctx, log, args[1:])
	}
}
