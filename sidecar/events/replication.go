package events

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/mneme-memory/mneme/sidecar/backoff"
)

// replication follows inserts into mneme.jobs through a persistent logical
// replication slot (pgoutput, proto_version 2). It confirms a position to
// the server only once every job inserted up to it has been handled (done,
// failed, or durably rescheduled), on a timer, so after a crash the slot
// replays what was not handled yet.
type replication struct {
	opts Options
	w    Waker
}

// slotBusyRetry is how long a sidecar that found the slot in use waits
// (listening for notifications) before trying the slot again.
const slotBusyRetry = 30 * time.Second

func newReplication(opts Options, w Waker) *replication { return &replication{opts: opts, w: w} }

// txn is one committed transaction that inserted jobs.
type txn struct {
	end pglogrepl.LSN
	ids []int64
}

func (r *replication) Run(ctx context.Context) error {
	log := r.opts.Logger.With("transport", Replication, "slot", r.opts.Slot)
	if r.opts.Pool == nil {
		return errors.New("replication transport needs a pool")
	}
	// The stream carries inserts only (publication mneme_jobs): a failed job
	// put back by mneme.retry_job is an update, announced by NOTIFY, so a
	// companion LISTEN wakes the runner for those.
	var companion sync.WaitGroup
	companion.Add(1)
	go func() {
		defer companion.Done()
		n := newNotifier(r.opts, r.w)
		n.requeuedOnly = true
		_ = n.Run(ctx)
	}()
	defer companion.Wait()
	fails := 0
	for ctx.Err() == nil {
		start := time.Now()
		err := r.session(ctx)
		if ctx.Err() != nil {
			break
		}
		if time.Since(start) > time.Minute {
			fails = 0
		}
		fails++
		if errors.Is(err, ErrSlotActive) {
			// Another sidecar follows the slot (one reader at a time): this
			// one LISTENs meanwhile and tries the slot again later.
			log.Info("slot busy (another sidecar streams from it); using LISTEN/NOTIFY meanwhile", "retry_in", slotBusyRetry)
			nctx, cancel := context.WithTimeout(ctx, slotBusyRetry)
			_ = newNotifier(r.opts, r.w).Run(nctx)
			cancel()
			fails = 0
			continue
		}
		d := r.opts.Reconnect.Delay(fails)
		log.Warn("replication stream lost; reconnecting", "err", err, "in", d.Round(time.Millisecond))
		if backoff.Sleep(ctx, d) != nil {
			break
		}
	}
	return nil
}

// session streams from the slot until the connection fails or ctx ends.
func (r *replication) session(ctx context.Context) error {
	conn, err := r.start(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	r.w.Wake() // catch up on what was enqueued while not streaming

	st := stream{r: r, idCol: map[uint32]int{}}
	next := time.Now()
	for {
		if !time.Now().Before(next) {
			if err := st.confirm(ctx, conn); err != nil {
				return err
			}
			next = time.Now().Add(r.opts.StatusEvery)
		}
		rctx, cancel := context.WithDeadline(ctx, next)
		raw, err := conn.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if pgconn.Timeout(err) && ctx.Err() == nil {
				continue
			}
			return fmt.Errorf("receive: %w", err)
		}
		switch m := raw.(type) {
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("server: %s (SQLSTATE %s)", m.Message, m.Code)
		case *pgproto3.CopyData:
			replyNow, err := st.copyData(m.Data)
			if err != nil {
				return err
			}
			if replyNow {
				next = time.Time{}
			}
		}
	}
}

// start makes sure the slot exists, opens a replication connection and
// starts streaming the publication from the slot's confirmed position.
func (r *replication) start(ctx context.Context) (*pgconn.PgConn, error) {
	log := r.opts.Logger.With("transport", Replication, "slot", r.opts.Slot)
	created, err := ensureSlot(ctx, r.opts.Pool, r.opts.Slot)
	if err != nil {
		return nil, err
	}
	if created {
		log.Info("created replication slot; it keeps WAL until confirmed, drop it with `mneme slot drop` when retiring mneme")
	}
	cfg, err := pgconn.ParseConfig(r.opts.DSN)
	if err != nil {
		return nil, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	cfg.RuntimeParams["replication"] = "database"
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("replication connect: %w", err)
	}
	err = pglogrepl.StartReplication(ctx, conn, r.opts.Slot, 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '2'", "publication_names '" + Publication + "'"},
	})
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		if isCode(err, "55006") {
			return nil, fmt.Errorf("%w: %v", ErrSlotActive, err)
		}
		return nil, fmt.Errorf("start replication: %w", err)
	}
	log.Info("streaming")
	return conn, nil
}

// stream is what a session knows of the stream: the transactions received
// whose jobs may not all be handled yet, the one being received, how far
// the stream was read and how far it was confirmed.
type stream struct {
	r         *replication
	pending   []txn
	cur       txn
	inTxn     bool
	commitAt  time.Time
	seen      pglogrepl.LSN // everything up to here was received
	confirmed pglogrepl.LSN
	idCol     map[uint32]int // relation id -> index of column "id"
}

// confirm tells the server the position up to which every streamed job is
// handled, so the slot may release the WAL before it.
func (st *stream) confirm(ctx context.Context, conn *pgconn.PgConn) error {
	pos, rest, err := st.r.handled(ctx, st.pending, st.seen, st.confirmed)
	if err != nil {
		// The database answers no queries (it may be shutting down, and a
		// walsender waiting for our confirmation would hold the shutdown
		// up): leave, and resume from the slot later.
		return fmt.Errorf("check which streamed jobs are handled: %w", err)
	}
	st.pending = rest
	if pos > st.confirmed {
		st.confirmed = pos
	}
	if err := pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: st.confirmed, WALFlushPosition: st.confirmed, WALApplyPosition: st.confirmed,
	}); err != nil {
		return fmt.Errorf("standby status update: %w", err)
	}
	return nil
}

// copyData reads one message of the stream: a keepalive (replyNow when the
// server asks for a status update) or WAL data.
func (st *stream) copyData(data []byte) (replyNow bool, err error) {
	if len(data) == 0 {
		return false, nil
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return false, fmt.Errorf("parse keepalive: %w", err)
		}
		if !st.inTxn && ka.ServerWALEnd > st.seen {
			st.seen = ka.ServerWALEnd
		}
		return ka.ReplyRequested, nil
	case pglogrepl.XLogDataByteID:
		x, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return false, fmt.Errorf("parse xlogdata: %w", err)
		}
		msg, err := pglogrepl.ParseV2(x.WALData, false)
		if err != nil {
			return false, fmt.Errorf("parse pgoutput message: %w", err)
		}
		st.decoded(msg)
	}
	return false, nil
}

// decoded follows one pgoutput message: the jobs a transaction inserts,
// announced (woken, OnEvent) once it commits.
func (st *stream) decoded(msg pglogrepl.Message) {
	switch msg := msg.(type) {
	case *pglogrepl.RelationMessageV2:
		for i, c := range msg.Columns {
			if c.Name == "id" {
				st.idCol[msg.RelationID] = i
			}
		}
	case *pglogrepl.BeginMessage:
		st.inTxn, st.cur, st.commitAt = true, txn{}, msg.CommitTime
	case *pglogrepl.InsertMessageV2:
		i, ok := st.idCol[msg.RelationID]
		if !ok || msg.Tuple == nil || i >= len(msg.Tuple.Columns) {
			return
		}
		if id, err := strconv.ParseInt(string(msg.Tuple.Columns[i].Data), 10, 64); err == nil {
			st.cur.ids = append(st.cur.ids, id)
		}
	case *pglogrepl.CommitMessage:
		st.inTxn = false
		st.cur.end = msg.TransactionEndLSN
		if len(st.cur.ids) > 0 {
			st.pending = append(st.pending, st.cur)
			w := st.r.w
			w.Wake()
			// The commit record reaches the WAL (and us) a moment before the
			// transaction is visible to other snapshots; a second wake covers
			// a claim that ran inside that window.
			time.AfterFunc(20*time.Millisecond, w.Wake)
			if st.r.opts.OnEvent != nil {
				for _, id := range st.cur.ids {
					st.r.opts.OnEvent(id, st.commitAt)
				}
			}
		}
		if st.cur.end > st.seen {
			st.seen = st.cur.end
		}
	}
}

// handled drops the leading transactions whose jobs are all handled and
// returns the position that is safe to confirm.
func (r *replication) handled(ctx context.Context, pending []txn, seen, confirmed pglogrepl.LSN) (pglogrepl.LSN, []txn, error) {
	if len(pending) == 0 {
		return max(seen, confirmed), nil, nil
	}
	const maxCheck = 5000
	var ids []int64
	for _, t := range pending {
		if len(ids) >= maxCheck {
			break
		}
		ids = append(ids, t.ids...)
	}
	// Not handled: waiting to run for the first time, or running now.
	rows, err := r.opts.Pool.Query(ctx, `SELECT mneme.unhandled_jobs($1)`, ids)
	if err != nil {
		return confirmed, pending, err
	}
	open, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return confirmed, pending, err
	}
	busy := make(map[int64]bool, len(open))
	for _, id := range open {
		busy[id] = true
	}
	pos := confirmed
	n := 0
	checked := 0
	for _, t := range pending {
		if checked >= len(ids) {
			break
		}
		done := true
		for _, id := range t.ids {
			if busy[id] {
				done = false
				break
			}
		}
		if !done {
			break
		}
		checked += len(t.ids)
		pos = max(pos, t.end)
		n++
	}
	rest := pending[n:]
	if len(rest) == 0 {
		pos = max(pos, seen)
	}
	return pos, rest, nil
}
