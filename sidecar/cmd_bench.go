package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
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
	if *asJSON {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	res.WriteTable(os.Stdout)
	return nil
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
	if *asJSON {
		return jsonLines(results)
	}
	bench.WriteEventsTable(os.Stdout, o, results)
	return nil
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
	if *asJSON {
		return jsonLines(results)
	}
	bench.WriteWritersTable(os.Stdout, o, results)
	return nil
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
	if *asJSON {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	res.WriteTable(os.Stdout)
	return nil
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
	if *asJSON {
		return jsonLines(results)
	}
	bench.WriteIngestTable(os.Stdout, o, results)
	return nil
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
		if *asJSON {
			if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
				return err
			}
		} else {
			res.WriteTable(os.Stdout)
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
	if *asJSON {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	res.WriteTable(os.Stdout)
	return nil
}
