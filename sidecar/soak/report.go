package soak

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

// Bind binds `mneme bench soak`'s flags; it returns --json.
func (o *Options) Bind(fs *flag.FlagSet) *bool {
	fs.DurationVar(&o.Duration, "duration", time.Minute, "how long the writers write (then the settle and the checks)")
	fs.Int64Var(&o.Seed, "seed", 0, "seed of the workload's randomness (0: from the clock; the report prints it)")
	fs.IntVar(&o.Tenants, "tenants", 3, "tenants, each with its own bound mneme_app login")
	fs.IntVar(&o.Conversations, "conversations", 12, "conversations, spread over the tenants (every 4th on the server's clock, every 6th erased whole, every 4th and every 6th carry marker words that are erased)")
	fs.BoolVar(&o.InProcess, "in-process", false, "run the sidecars in this process (killed by an abort) instead of as `mneme run` processes (killed by SIGKILL)")
	fs.DurationVar(&o.ChaosEvery, "chaos-every", 4*time.Second, "mean time between sidecar kills, restarts and starts, and between erases")
	fs.DurationVar(&o.Gap, "gap", 3*time.Second, "segment_gap_seconds of the run (the message times are on a clock compressed to it)")
	fs.DurationVar(&o.Lease, "lease", 3*time.Second, "MNEME_JOB_LEASE of the sidecars")
	fs.IntVar(&o.Concurrency, "concurrency", 2, "jobs each sidecar runs at once")
	fs.DurationVar(&o.Settle, "settle", time.Minute, "at most this long for the queue to empty after the writers stop")
	fs.StringVar(&o.Vector, "vector", "auto", "embedding variant: auto, pgvector or array")
	fs.BoolVar(&o.Keep, "keep", false, "keep the run's database (its name is logged)")
	return fs.Bool("json", false, "print one JSON object")
}

// Validate checks the options and fills the sidecar binary.
func (o *Options) Validate() error {
	if o.Duration <= 0 || o.Duration > 24*time.Hour {
		return errors.New("--duration must be positive, at most 24h")
	}
	if o.Tenants < 1 || o.Tenants > 100 || o.Conversations < o.Tenants || o.Conversations > 1000 {
		return errors.New("--tenants must be 1 to 100 and --conversations from --tenants to 1000")
	}
	if o.ChaosEvery < 100*time.Millisecond || o.Gap < 100*time.Millisecond || o.Lease < time.Second || o.Settle <= 0 {
		return errors.New("--chaos-every and --gap must be at least 100ms, --lease at least 1s, --settle positive")
	}
	if o.Concurrency < 1 || o.Concurrency > 64 {
		return errors.New("--concurrency must be 1 to 64")
	}
	switch o.Vector {
	case "", "auto", "pgvector", "array":
	default:
		return fmt.Errorf("--vector %q: use auto, pgvector or array", o.Vector)
	}
	if o.Vector == "" {
		o.Vector = "auto"
	}
	if o.Binary == "" && !o.InProcess {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("the mneme binary to run sidecars with: %w", err)
		}
		o.Binary = exe
	}
	return nil
}

// WriteTable prints the result for a person.
func (r *Result) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "mneme bench soak: seed %d, vector %s, %s sidecars (lease %s, chaos every %s), %d tenants, %d conversations, gap %s, writers for %.0f s, settle %.1f s\n",
		r.Seed, r.Variant, r.Sidecars, r.Lease, r.ChaosEvery, r.Tenants, r.Conversations, r.Gap, r.WriteSeconds, r.SettleSeconds)
	fmt.Fprintf(w, "  throughput: %.1f messages/s, %.1f calls/s (%d calls), %.1f jobs/s (%d jobs)\n",
		r.MessagesPerSec, r.CallsPerSec, r.Calls, r.JobsPerSec, r.Jobs)
	fmt.Fprintf(w, "  sidecars: %d starts, %d kills, %d graceful stops; their log: %d errors, %d warnings\n",
		r.SidecarStarts, r.SidecarKills, r.SidecarStops, r.SidecarErrors, r.SidecarWarnings)
	for _, l := range r.SidecarLog {
		fmt.Fprintf(w, "    %s\n", l)
	}
	pass := 0
	for _, iv := range r.Invariants {
		mark := "FAIL"
		if iv.Pass {
			mark, pass = "PASS", pass+1
		}
		fmt.Fprintf(w, "%s  %s (%d checked, %d failed)\n      %s\n", mark, iv.Name, iv.Checked, iv.Failed, iv.Detail)
		for _, e := range iv.Examples {
			fmt.Fprintf(w, "      - %s\n", e)
		}
	}
	fmt.Fprintf(w, "%d of %d invariants passed\n", pass, len(r.Invariants))
}
