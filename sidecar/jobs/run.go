package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/mneme-memory/mneme/sidecar/tracing"
	"github.com/mneme-memory/mneme/sidecar/usage"
)

// One claimed job's run: the handler, its commit, and the outcome recorded
// (done, retried, failed, lost or released).

// runJob runs one claimed job to one of: done, retried, failed, lost, released.
func (r *Runner) runJob(parent context.Context, c claimed) {
	start := time.Now()
	r.opts.Observer.Claimed(c.Kind, max(0, start.Sub(c.readyAt)))
	log := r.log.With("job", c.ID, "kind", c.Kind, "attempt", c.Attempts)

	ctx, cancel := context.WithTimeout(parent, r.opts.JobTimeout)
	defer cancel()
	ctx, led := usage.WithLedger(ctx, c.Kind, c.Tenant)
	// The job's span: its model calls and database transactions are its
	// children (a no-op span when tracing is off).
	ctx, span := tracing.Tracer().Start(ctx, "job "+c.Kind, trace.WithAttributes(
		attribute.Int64("mneme.job.id", c.ID), attribute.String("mneme.job.kind", c.Kind),
		attribute.String("mneme.tenant", c.Tenant), attribute.Int("mneme.job.attempt", c.Attempts)))
	var spanErr error
	finish := func(outcome string) {
		r.opts.Observer.Finished(c.Kind, outcome, time.Since(start))
		if span.IsRecording() {
			t := led.Totals()
			span.SetAttributes(attribute.String("mneme.job.outcome", outcome), attribute.Int64("mneme.llm.calls", t.Calls),
				attribute.Int64("gen_ai.usage.input_tokens", t.PromptTokens), attribute.Int64("gen_ai.usage.output_tokens", t.CompletionTokens))
		}
	}
	defer func() { tracing.End(span, spanErr) }()
	rn := &run{job: c.Job, attempt: c.Attempts, cancel: cancel}
	r.mu.Lock()
	r.running[c.ID] = rn
	h, ok := r.handlers[c.Kind]
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.running, c.ID)
		r.mu.Unlock()
	}()

	var err error
	if !ok && !Declared(c.Kind) && r.newerKind(ctx, c) {
		finish(OutcomeReleased)
		return
	}
	if !ok {
		err = fmt.Errorf("%w: no handler for job kind %q in this sidecar (it handles: %s)",
			ErrPermanent, c.Kind, strings.Join(r.Kinds(), ", "))
	} else {
		var committed bool
		committed, err = r.execute(ctx, h, c, led)
		if err == nil && committed {
			log.Debug("job done", "took", time.Since(start))
			finish(OutcomeDone)
			return
		}
		if err == nil {
			log.Warn("lease lost before commit; rolled back, the job's new holder decides")
			finish(OutcomeLost)
			return
		}
	}
	spanErr = err
	if r.isAborted() {
		return // a crash records nothing
	}
	// Shutdown past its deadline cancelled the run: give the job back.
	if parent.Err() != nil || errors.Is(ctx.Err(), context.Canceled) {
		rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer rcancel()
		if rerr := release(rctx, r.pool, c.ID, r.opts.WorkerID, c.Attempts); rerr != nil {
			log.Error("release job", "err", rerr)
		}
		log.Info("job released", "err", err)
		finish(OutcomeReleased)
		return
	}
	permanent := errors.Is(err, ErrPermanent)
	delay := r.opts.Retry.Delay(c.Attempts)
	// (a fresh context, for the record to outlive the job's: its span
	// still the job's)
	fctx, fcancel := context.WithTimeout(trace.ContextWithSpan(context.Background(), span), 10*time.Second)
	defer fcancel()
	state, ferr := failRecorded(fctx, r.pool, led, log, c.ID, r.opts.WorkerID, c.Attempts, storableError(err.Error()), delay, permanent, r.opts.MaxAttempts)
	if ferr != nil {
		// Whatever made the record fail (a trigger, the text), a plainer
		// one ends the job failed with both errors: a job never stays
		// running on a failure nobody could write down.
		log.Error("job failed and recording the failure failed; recording it as a permanent failure", "err", err, "record_err", ferr)
		msg := storableError(fmt.Sprintf("recording this job's failure failed (%v); its error: %v", ferr, err))
		state, ferr = fail(fctx, r.pool, c.ID, r.opts.WorkerID, c.Attempts, msg, 0, true, r.opts.MaxAttempts)
	}
	switch {
	case ferr != nil:
		log.Error("job failed and recording the failure failed twice; the lease will expire and the claim fail or retry it",
			"err", err, "record_err", ferr)
	case state == "failed":
		log.Error("job failed", "err", err, "permanent", permanent, "max_attempts", c.maxAttempts)
		finish(OutcomeFailed)
	case state == "pending":
		log.Warn("job attempt failed; will retry", "err", err, "retry_in", delay.Round(time.Millisecond))
		finish(OutcomeRetried)
	case state == "done":
		log.Info("job attempt failed; an equivalent pending job takes over", "err", err)
		finish(OutcomeDone)
	default:
		log.Warn("job attempt failed after its lease was lost", "err", err)
		finish(OutcomeLost)
	}
}

// execute runs the handler; its Commit (or, if it made none, the runner's)
// completes the job in the transaction of its effect. It returns
// committed=false with a nil error when the lease was lost.
func (r *Runner) execute(ctx context.Context, h Handler, c claimed, led *usage.Ledger) (committed bool, err error) {
	st := &runStore{db: r.pool, id: c.ID, worker: r.opts.WorkerID, attempt: c.Attempts, ledger: led, log: r.log}
	err = safeCall(ctx, h, st, c.Job)
	if err == nil && !st.tried {
		err = st.Commit(ctx, func(pgx.Tx) error { return nil })
	}
	switch {
	case errors.Is(err, errLeaseLost):
		return false, nil
	case err != nil:
		return false, err
	case !st.done:
		return false, fmt.Errorf("job %d: the handler returned nil after a failed commit", c.ID)
	}
	return true, nil
}

func safeCall(ctx context.Context, h Handler, st Store, job Job) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panicked: %v", p)
		}
	}()
	return h(ctx, st, job)
}

// storableError is an error as a text column takes it: valid UTF-8
// without NUL bytes (PostgreSQL refuses both; a handler's error may quote
// a message or model output holding them).
func storableError(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\\0")
}

// newerKind: a job of a kind this sidecar has no handler for and does not
// declare, which mneme.job_kinds declares (a migrate of a later release
// added it while this sidecar ran), is given back unclaimed, its attempt
// not counted, and the kind left to the newer sidecars from now on
// (Leave). Reports whether it did.
func (r *Runner) newerKind(ctx context.Context, c claimed) bool {
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	newer, err := inSchema(qctx, r.pool, c.Kind)
	if err != nil || !newer {
		return false
	}
	r.Leave(c.Kind)
	if err := release(qctx, r.pool, c.ID, r.opts.WorkerID, c.Attempts); err != nil {
		r.log.Error("release job", "id", c.ID, "kind", c.Kind, "err", err)
	}
	return true
}
