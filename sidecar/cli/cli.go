// Package cli is the command line's machinery: one table of commands with
// nested groups, help on stdout (exit 0) for every command, usage errors
// (exit 2) found before a command has any side effect. Package main holds
// the table and the commands.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
)

// Command is one subcommand: Run gets the arguments after its name. A group
// (bench, eval) has Subs instead of Run.
type Command struct {
	Name    string
	Args    string // what follows the name in the usage line
	Summary string
	Run     func(ctx context.Context, log *slog.Logger, args []string) error
	Subs    []Command
}

// ErrUsage makes Main print the error and exit 2; ErrHelp makes it exit 0
// after a command printed its usage on stdout.
var (
	ErrUsage = errors.New("usage")
	ErrHelp  = errors.New("help printed")
)

// Main runs the command line args of program name and returns the exit
// code: 0, 1 for a failure, 2 for a usage error.
func Main(ctx context.Context, log *slog.Logger, name, version string, cmds []Command, args []string) int {
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		fmt.Println(name, version)
		return 0
	}
	err := run(ctx, log, name, cmds, args)
	switch {
	case err == nil, errors.Is(err, ErrHelp):
		return 0
	case errors.Is(err, ErrUsage):
		fmt.Fprintf(os.Stderr, "%v\n", err)
		return 2
	default:
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		if hint := Hint(err); hint != "" {
			fmt.Fprintf(os.Stderr, "HINT: %s\n", hint)
		}
		return 1
	}
}

// Hint is the HINT of the PostgreSQL error in err's chain, where mneme's
// SQL says what to do, unless the message already carries it ("" when
// there is none).
func Hint(err error) string {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) || pg.Hint == "" || strings.Contains(err.Error(), pg.Hint) {
		return ""
	}
	return pg.Hint
}

// run finds and runs the command args[0] of cmds (prefix: "mneme" or
// "mneme bench"). help, -h and --help print the list on stdout; help
// <command> is <command> --help.
func run(ctx context.Context, log *slog.Logger, prefix string, cmds []Command, args []string) error {
	if len(args) == 0 {
		list(os.Stderr, prefix, cmds)
		return fmt.Errorf("%w: %s needs a command", ErrUsage, prefix)
	}
	switch args[0] {
	case "-h", "-help", "--help":
		list(os.Stdout, prefix, cmds)
		return ErrHelp
	case "help":
		if len(args) == 1 {
			list(os.Stdout, prefix, cmds)
			return ErrHelp
		}
		return run(ctx, log, prefix, cmds, append(append([]string{}, args[1:]...), "--help"))
	}
	for _, c := range cmds {
		if c.Name != args[0] {
			continue
		}
		if c.Subs != nil {
			return run(ctx, log, prefix+" "+c.Name, c.Subs, args[1:])
		}
		return c.Run(ctx, log, args[1:])
	}
	return fmt.Errorf("%w: %s: unknown command %q (see %s help)", ErrUsage, prefix, args[0], prefix)
}

func list(w io.Writer, prefix string, cmds []Command) {
	fmt.Fprintf(w, "usage: %s <command> [flags]\n\ncommands:\n", prefix)
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-10s %s\n", c.Name, c.Summary)
	}
	fmt.Fprintf(w, "\n%s help <command> (or <command> --help) describes one\n", prefix)
}

// Find returns the command of a path such as "bench retrieve".
func Find(cmds []Command, path string) Command {
	var c Command
	for _, name := range strings.Fields(path) {
		for _, x := range cmds {
			if x.Name == name {
				c = x
				break
			}
		}
		cmds = c.Subs
	}
	return c
}

// Flags is the flag set of the command at path ("run", "bench retrieve") of
// program name: its usage, printed by --help on stdout, is the command's
// usage line, summary and flags.
func Flags(cmds []Command, name, path string) *flag.FlagSet {
	fs := flag.NewFlagSet(name+" "+path, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		c := Find(cmds, path)
		w := os.Stdout
		fmt.Fprintf(w, "usage: %s %s %s\n\n%s\n", name, path, c.Args, c.Summary)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(w, "\nflags:")
			fs.SetOutput(w)
			fs.PrintDefaults()
			fs.SetOutput(io.Discard)
		}
	}
	return fs
}

// Parse parses args: -h/--help prints the usage once and returns ErrHelp; a
// bad flag or a stray argument (unless positional) is a usage error, with
// the reason on stderr and no usage on stdout. Nothing has happened yet
// when it returns an error.
func Parse(fs *flag.FlagSet, args []string, positional bool) error {
	// flag.Parse calls Usage itself, for -h and for every bad flag; print
	// it here instead, and only for -h.
	usage := fs.Usage
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.Usage = usage
	if errors.Is(err, flag.ErrHelp) {
		usage()
		return ErrHelp
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %v (see %s --help)", ErrUsage, fs.Name(), err, fs.Name())
	}
	if !positional && fs.NArg() > 0 {
		return fmt.Errorf("%w: %s: unexpected argument %q (see %s --help)", ErrUsage, fs.Name(), fs.Arg(0), fs.Name())
	}
	return nil
}

// Action parses `<action> [flags]` for commands such as cluster and slot:
// the action must be one of actions; --help anywhere prints the usage.
func Action(fs *flag.FlagSet, args []string, actions ...string) (string, error) {
	if slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "-help" || a == "--help" }) {
		fs.Usage()
		return "", ErrHelp
	}
	if len(args) == 0 || !slices.Contains(actions, args[0]) {
		got := "nothing"
		if len(args) > 0 {
			got = fmt.Sprintf("%q", args[0])
		}
		return "", fmt.Errorf("%w: %s: want one of %v, got %s (see %s --help)", ErrUsage, fs.Name(), actions, got, fs.Name())
	}
	return args[0], Parse(fs, args[1:], false)
}

// LogLevel parses a log level (debug, info, warn, error); anything else is info.
func LogLevel(s string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return slog.LevelInfo
	}
	return l
}

// UUIDList is a repeatable flag of uuids (mneme export's --conversation).
type UUIDList []uuid.UUID

func (l *UUIDList) String() string { return fmt.Sprint(*l) }

// Set parses one uuid.
func (l *UUIDList) Set(s string) error {
	id, err := uuid.Parse(s)
	if err != nil {
		return fmt.Errorf("not a conversation id: %q", s)
	}
	*l = append(*l, id)
	return nil
}
