package events

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/sidecar/backoff"
)

// Application names of the LISTEN connections (unless DATABASE_URL sets
// one): the notify transport's, and the replication transport's companion
// that wakes for requeued jobs only.
const (
	ListenerName        = "mneme-listen"
	RequeueListenerName = "mneme-listen-requeued"
)

// notifier LISTENs on a dedicated connection. Payloads are hints: a lost
// notification only delays a job until the next sweep.
type notifier struct {
	opts Options
	w    Waker
	// requeuedOnly: wake only for jobs put back by mneme.retry_job (the
	// replication transport's companion: it sees inserts, not updates).
	requeuedOnly bool
}

func newNotifier(opts Options, w Waker) *notifier { return &notifier{opts: opts, w: w} }

func (n *notifier) Run(ctx context.Context) error {
	log := n.opts.Logger.With("transport", Notify)
	fails := 0
	for ctx.Err() == nil {
		start := time.Now()
		err := n.listen(ctx)
		if ctx.Err() != nil {
			break
		}
		if time.Since(start) > time.Minute {
			fails = 0
		}
		fails++
		d := n.opts.Reconnect.Delay(fails)
		log.Warn("LISTEN connection lost; reconnecting", "err", err, "in", d.Round(time.Millisecond))
		if backoff.Sleep(ctx, d) != nil {
			break
		}
	}
	return nil
}

func (n *notifier) listen(ctx context.Context) error {
	cfg, err := pgx.ParseConfig(n.opts.DSN)
	if err != nil {
		return fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	if cfg.RuntimeParams["application_name"] == "" {
		// Tells the two listeners apart in pg_stat_activity.
		cfg.RuntimeParams["application_name"] = ListenerName
		if n.requeuedOnly {
			cfg.RuntimeParams["application_name"] = RequeueListenerName
		}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	n.opts.Logger.Info("listening", "transport", Notify, "channel", Channel, "requeued_only", n.requeuedOnly)
	// Jobs enqueued while we were not listening: the sweep would find them
	// too, but a reconnect is a good moment to look.
	n.w.Wake()
	for {
		note, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		// The payload is "" for a new job and "requeued" for a retried one:
		// no ids or kinds, which any role that LISTENs would see.
		if n.requeuedOnly && note.Payload != "requeued" {
			continue
		}
		n.w.Wake()
	}
}
