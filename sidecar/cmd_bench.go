package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/mneme-memory/mneme/sidecar/bench"
	"github.com/mneme-memory/mneme/sidecar/cli"
)

func cmdBenchRetrieve(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("bench retrieve")
	o := bench.RetrieveOptions{Log: log}
	asJSON := o.Bind(fs)
	if err := cli.Parse(fs, args, false); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	var err error
	if o.Server, err = bench.Server("retrieve"); err != nil {
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
	if err := cli.Parse(fs, args, false); err != nil {
		return err
	}
	if err := o.Validate(*transports); err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	var err error
	if o.Server, err = bench.Server("events"); err != nil {
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
	if err := cli.Parse(fs, args, false); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	var err error
	if o.Server, err = bench.Server("writers"); err != nil {
		return err
	}
	results, err := bench.Writers(ctx, o)
	if err != nil {
		return err
	}
	if *asJSON {
		return jsonLines(results)
	}
	fmt.Printf("mneme bench writers: %d writers x %d messages, add_message without a time\n", o.Writers, o.Messages)
	bench.WriteWritersTable(os.Stdout, results)
	return nil
}

func cmdBenchScale(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("bench scale")
	o := bench.ScaleOptions{Log: log, Progress: os.Stderr}
	sizes, asJSON := o.Bind(fs)
	if err := cli.Parse(fs, args, false); err != nil {
		return err
	}
	if err := o.Validate(*sizes); err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	var err error
	if o.Server, err = bench.Server("scale"); err != nil {
		return err
	}
	res, err := bench.Scale(ctx, o)
	if err != nil {
		return err
	}
	if o.Plot != "" {
		f, err := os.Create(o.Plot)
		if err != nil {
			return err
		}
		if err := res.WritePlot(f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
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
	if err := cli.Parse(fs, args, false); err != nil {
		return err
	}
	if err := o.Validate(*convs); err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	var err error
	if o.Server, err = bench.Server("ingest"); err != nil {
		return err
	}
	results, err := bench.Ingest(ctx, o)
	if err != nil {
		return err
	}
	if *asJSON {
		return jsonLines(results)
	}
	rate := "as fast as they can"
	if o.Rate > 0 {
		rate = fmt.Sprintf("%d messages/s in all", o.Rate)
	}
	variant := ""
	if len(results) > 0 {
		variant = results[0].Variant
	}
	fmt.Printf("mneme bench ingest: writers for %s per run (%s), %d sidecars x %d jobs at once, offline pipelines, %d memories stored before, variant %s\n",
		o.Duration, rate, o.Sidecars, o.Concurrency, o.Preload, variant)
	bench.WriteIngestTable(os.Stdout, results)
	return nil
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
