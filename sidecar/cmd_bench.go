package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/mneme-memory/mneme/sidecar/bench"
	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/soak"
)

func cmdBenchRetrieve(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("bench retrieve")
	o := bench.RetrieveOptions{Log: log}
	asJSON := o.Bind(fs)
	if err := benchSetup("retrieve", fs, args, func() error { return o.Validate() }, &o.Server); err != nil {
		return err
	}
	res, err := bench.Retrieve(ctx, o)
	if errors.Is(err, bench.ErrReuseMismatch) {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	if err != nil {
		return err
	}
	return writeResult(*asJSON, res, res.WriteTable)
}

func cmdBenchEvents(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("bench events")
	o := bench.EventsOptions{Log: log}
	transports, asJSON := o.Bind(fs)
	if err := benchSetup("events", fs, args, func() error { return o.Validate(*transports) }, &o.Server); err != nil {
		return err
	}
	results, err := bench.Events(ctx, o)
	if err != nil {
		return err
	}
	return writeResults(*asJSON, results, func(w io.Writer) { bench.WriteEventsTable(w, o, results) })
}

func cmdBenchWriters(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("bench writers")
	o := bench.WritersOptions{Log: log}
	asJSON := o.Bind(fs)
	if err := benchSetup("writers", fs, args, func() error { return o.Validate() }, &o.Server); err != nil {
		return err
	}
	results, err := bench.Writers(ctx, o)
	if err != nil {
		return err
	}
	return writeResults(*asJSON, results, func(w io.Writer) { bench.WriteWritersTable(w, o, results) })
}

func cmdBenchScale(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("bench scale")
	o := bench.ScaleOptions{Log: log, Progress: os.Stderr}
	sizes, asJSON := o.Bind(fs)
	if err := benchSetup("scale", fs, args, func() error { return o.Validate(*sizes) }, &o.Server); err != nil {
		return err
	}
	res, err := bench.Scale(ctx, o)
	if err != nil {
		return err
	}
	if o.Plot != "" {
		if err := cli.WriteFile(o.Plot, res.WritePlot); err != nil {
			return err
		}
	}
	return writeResult(*asJSON, res, res.WriteTable)
}

func cmdBenchIngest(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("bench ingest")
	o := bench.IngestOptions{Log: log}
	convs, asJSON := o.Bind(fs)
	if err := benchSetup("ingest", fs, args, func() error { return o.Validate(*convs) }, &o.Server); err != nil {
		return err
	}
	results, err := bench.Ingest(ctx, o)
	if err != nil {
		return err
	}
	return writeResults(*asJSON, results, func(w io.Writer) { bench.WriteIngestTable(w, o, results) })
}

func cmdBenchSoak(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("bench soak")
	o := soak.Options{Log: log}
	asJSON := o.Bind(fs)
	if err := benchSetup("soak", fs, args, func() error { return o.Validate() }, &o.Server); err != nil {
		return err
	}
	res, err := soak.Run(ctx, o)
	if res != nil {
		if werr := writeResult(*asJSON, res, res.WriteTable); werr != nil {
			return werr
		}
	}
	return err
}

// benchSetup is what every bench command does before it runs: parse its
// flags, check its options (a usage error) and find the server its scratch
// database goes on.
func benchSetup(name string, fs *flag.FlagSet, args []string, validate func() error, server *string) error {
	if err := cli.Parse(fs, args, false); err != nil {
		return err
	}
	if err := validate(); err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	var err error
	*server, err = bench.Server(name)
	return err
}

// writeResult prints a bench's result as one JSON object or as its table.
func writeResult(asJSON bool, res any, table func(io.Writer)) error {
	if asJSON {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	table(os.Stdout)
	return nil
}

// writeResults prints one JSON object per result, or their table.
func writeResults[T any](asJSON bool, results []T, table func(io.Writer)) error {
	if !asJSON {
		table(os.Stdout)
		return nil
	}
	enc := json.NewEncoder(os.Stdout)
	for _, r := range results {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

func cmdBenchTransfer(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("bench transfer")
	o := bench.TransferOptions{Log: log}
	asJSON := o.Bind(fs)
	if err := benchSetup("transfer", fs, args, func() error { return o.Validate() }, &o.Server); err != nil {
		return err
	}
	res, err := bench.Transfer(ctx, o)
	if err != nil {
		return err
	}
	return writeResult(*asJSON, res, res.WriteTable)
}
