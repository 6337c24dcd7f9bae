package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/mneme-memory/mneme/sidecar/cluster"
)

// cmdCluster manages the private PostgreSQL of `make demo` and `make test`.
func cmdCluster(ctx context.Context, log *slog.Logger, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: mneme cluster start|stop|url|env [-dir DIR]", errUsage)
	}
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	dir := fs.String("dir", ".mneme/pg", "data directory of the private cluster")
	db := fs.String("db", "mneme", "database to create and point DATABASE_URL at")
	if err := fs.Parse(args[1:]); err != nil {
		return errUsage
	}
	if args[0] == "stop" {
		c, err := cluster.Attach(ctx, *dir)
		if errors.Is(err, cluster.ErrNotCreated) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := c.Stop(ctx); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "stopped", c.Dir)
		return nil
	}
	c, err := cluster.Start(ctx, *dir, cluster.Options{Logf: func(f string, a ...any) { log.Info(fmt.Sprintf(f, a...)) }})
	if err != nil {
		return err
	}
	switch args[0] {
	case "start", "url", "env":
		if err := c.CreateDatabase(ctx, *db); err != nil {
			return err
		}
		if args[0] == "env" {
			fmt.Printf("export DATABASE_URL=%s\n", c.URL(*db))
		} else {
			fmt.Println(c.URL(*db))
		}
		return nil
	default:
		return fmt.Errorf("%w: unknown cluster action %q (start, stop, url, env)", errUsage, args[0])
	}
}
