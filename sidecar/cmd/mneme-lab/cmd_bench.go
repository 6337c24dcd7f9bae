package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/mneme-memory/mneme/sidecar/bench"
	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/soak"
)

func cmdBenchRetrieve(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("bench retrieve")
	o := bench.RetrieveOptions{Log: log}
	asJSON := o.Bind(fs)
	if err := bench.Setup("retrieve", fs, args, func() error { return o.Validate() }, &o.Server); err != nil {
		return err
	}
	res, err := bench.Retrieve(ctx, o)
	if errors.Is(err, bench.ErrReuseMismatch) {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	if err != nil {
		return err
	}
	return cli.Result(*asJSON, res, res.WriteTable)
}

func cmdBenchEvents(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("bench events")
	o := bench.EventsOptions{Log: log}
	transports, asJSON := o.Bind(fs)
	if err := bench.Setup("events", fs, args, func() error { return o.Validate(*transports) }, &o.Server); err != nil {
		return err
	}
	results, err := bench.Events(ctx, o)
	if err != nil {
		return err
	}
	return cli.Results(*asJSON, results, func(w io.Writer) { bench.WriteEventsTable(w, o, results) })
}

func cmdBenchWriters(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("bench writers")
	o := bench.WritersOptions{Log: log}
	asJSON := o.Bind(fs)
	if err := bench.Setup("writers", fs, args, func() error { return o.Validate() }, &o.Server); err != nil {
		return err
	}
	results, err := bench.Writers(ctx, o)
	if err != nil {
		return err
	}
	return cli.Results(*asJSON, results, func(w io.Writer) { bench.WriteWritersTable(w, o, results) })
}

func cmdBenchScale(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("bench scale")
	o := bench.ScaleOptions{Log: log, Progress: os.Stderr}
	sizes, asJSON := o.Bind(fs)
	if err := bench.Setup("scale", fs, args, func() error { return o.Validate(*sizes) }, &o.Server); err != nil {
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
	return cli.Result(*asJSON, res, res.WriteTable)
}

func cmdBenchIngest(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("bench ingest")
	o := bench.IngestOptions{Log: log}
	convs, asJSON := o.Bind(fs)
	if err := bench.Setup("ingest", fs, args, func() error { return o.Validate(*convs) }, &o.Server); err != nil {
		return err
	}
	results, err := bench.Ingest(ctx, o)
	if err != nil {
		return err
	}
	return cli.Results(*asJSON, results, func(w io.Writer) { bench.WriteIngestTable(w, o, results) })
}

func cmdBenchSoak(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("bench soak")
	o := soak.Options{Log: log}
	asJSON := o.Bind(fs)
	if err := bench.Setup("soak", fs, args, func() error {
		if err := o.Validate(); err != nil {
			return err
		}
		if !o.InProcess { // Validate named this binary, which has no run
			bin, err := daemonBinary()
			if err != nil {
				return err
			}
			o.Binary = bin
		}
		return nil
	}, &o.Server); err != nil {
		return err
	}
	res, err := soak.Run(ctx, o)
	if res != nil {
		if werr := cli.Result(*asJSON, res, res.WriteTable); werr != nil {
			return werr
		}
	}
	return err
}

func cmdBenchErase(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("bench erase")
	o := bench.EraseOptions{Log: log}
	asJSON := o.Bind(fs)
	if err := bench.Setup("erase", fs, args, func() error { return o.Validate() }, &o.Server); err != nil {
		return err
	}
	res, err := bench.Erase(ctx, o)
	if err != nil {
		return err
	}
	return cli.Result(*asJSON, res, res.WriteTable)
}

func cmdBenchTransfer(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("bench transfer")
	o := bench.TransferOptions{Log: log}
	asJSON := o.Bind(fs)
	if err := bench.Setup("transfer", fs, args, func() error { return o.Validate() }, &o.Server); err != nil {
		return err
	}
	res, err := bench.Transfer(ctx, o)
	if err != nil {
		return err
	}
	return cli.Result(*asJSON, res, res.WriteTable)
}

// daemonBinary is the mneme binary the soak's sidecar processes run
// (`mneme run`; this command has no run): $MNEME_DAEMON, else mneme beside
// this binary (bin/mneme beside bin/mneme-lab, as make build puts them),
// else mneme on PATH.
func daemonBinary() (string, error) {
	if b := os.Getenv("MNEME_DAEMON"); b != "" {
		return b, nil
	}
	if exe, err := os.Executable(); err == nil {
		b := filepath.Join(filepath.Dir(exe), "mneme")
		if st, err := os.Stat(b); err == nil && !st.IsDir() {
			return b, nil
		}
	}
	if b, err := exec.LookPath("mneme"); err == nil {
		return b, nil
	}
	return "", errors.New("bench soak runs its sidecars as `mneme run`: build bin/mneme beside bin/mneme-lab (make build), " +
		"set MNEME_DAEMON to a mneme binary, or pass --in-process")
}
