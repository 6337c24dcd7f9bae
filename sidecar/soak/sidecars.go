package soak

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mneme-memory/mneme/sidecar/clip"
	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/daemon"
)

// A sidecar of the soak: `mneme run` as a process (killed with SIGKILL, the
// faithful crash) or the same daemon in this process (killed with
// Runner.Abort: handler contexts cancelled, nothing released or recorded,
// leases left to expire, as a crash leaves them).
type sidecar interface {
	kill()         // at once, as a crash
	stop()         // gracefully (SIGTERM): in-flight jobs finish or are released
	exited() error // non-nil once it stopped by itself (a crash the soak did not cause)
}

// fleet starts, kills and restarts the sidecars and counts what it did.
type fleet struct {
	o    Options
	url  string // the worker login's DATABASE_URL
	logs *errorLog

	mu      sync.Mutex
	slots   [2]sidecar // the primary and the second sidecar
	started int
	kills   int
	stops   int
	crashed []string // sidecars that exited on their own
}

func (f *fleet) start(slot int) error {
	var s sidecar
	var err error
	name := fmt.Sprintf("sidecar%d", slot+1)
	if f.o.InProcess {
		s, err = startInProcess(f.url, f.o, f.logs.logger(name))
	} else {
		s, err = startProcess(f.url, f.o, f.logs, name)
	}
	if err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	f.mu.Lock()
	f.slots[slot] = s
	f.started++
	f.mu.Unlock()
	return nil
}

// chaos kills, restarts, starts and stops sidecars at random moments until
// ctx ends, the primary never down for long.
func (f *fleet) chaos(ctx context.Context, rng *lockedRand) error {
	for {
		wait := time.Duration(float64(f.o.ChaosEvery) * (0.5 + rng.Float64()))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		f.noteCrashes()
		slot := 0
		if rng.Intn(3) == 0 {
			slot = 1
		}
		f.mu.Lock()
		s := f.slots[slot]
		first, second := f.kills+f.stops == 0, f.slots[1] == nil && f.started < 3
		f.mu.Unlock()
		// Every run kills the primary first and then starts the second
		// sidecar; chance decides the rest.
		if first {
			slot = 0
			f.mu.Lock()
			s = f.slots[0]
			f.mu.Unlock()
		} else if second {
			slot, s = 1, nil
		}
		switch {
		case s == nil:
			if err := f.start(slot); err != nil {
				return err
			}
		case !first && rng.Intn(4) == 0:
			s.stop()
			f.mu.Lock()
			f.slots[slot], f.stops = nil, f.stops+1
			f.mu.Unlock()
		default:
			s.kill()
			f.mu.Lock()
			f.slots[slot], f.kills = nil, f.kills+1
			f.mu.Unlock()
			if slot == 0 || rng.Intn(2) == 0 {
				// back after a moment, as a supervisor restarts it
				select {
				case <-ctx.Done():
				case <-time.After(time.Duration(rng.Intn(1000)) * time.Millisecond):
				}
				if err := f.start(slot); err != nil {
					return err
				}
			}
		}
	}
}

// noteCrashes records sidecars that exited without being told to.
func (f *fleet) noteCrashes() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, s := range f.slots {
		if s == nil {
			continue
		}
		if err := s.exited(); err != nil {
			f.crashed = append(f.crashed, fmt.Sprintf("sidecar%d: %v", i+1, err))
			f.slots[i] = nil
		}
	}
}

// ensurePrimary starts the primary if it is down (for the settle phase).
func (f *fleet) ensurePrimary() error {
	f.noteCrashes()
	f.mu.Lock()
	up := f.slots[0] != nil
	f.mu.Unlock()
	if up {
		return nil
	}
	return f.start(0)
}

// stopAll stops every sidecar gracefully.
func (f *fleet) stopAll() {
	f.noteCrashes()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, s := range f.slots {
		if s != nil {
			s.stop()
			f.slots[i] = nil
		}
	}
}

// process is `mneme run` as a child process.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func startProcess(dbURL string, o Options, logs *errorLog, name string) (*process, error) {
	cmd := exec.Command(o.Binary, "run")
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "DATABASE_URL=") && !strings.HasPrefix(e, "MNEME_") || strings.HasPrefix(e, "MNEME_TEST_") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Env = append(cmd.Env, "DATABASE_URL="+dbURL, "MNEME_EVENTS=notify", "MNEME_METRICS_ADDR=off",
		"MNEME_CONCURRENCY="+fmt.Sprint(o.Concurrency), "MNEME_POLL_INTERVAL=500ms",
		"MNEME_JOB_LEASE="+o.Lease.String(), "MNEME_SHUTDOWN_TIMEOUT=2s", "MNEME_LOG_LEVEL=warn")
	stderr := logs.writer(name)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		_ = stderr.Close()
		return nil, err
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); _ = stderr.Close(); close(p.done) }()
	return p, nil
}

func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.kill()
	}
}

func (p *process) exited() error {
	select {
	case <-p.done:
		if p.err == nil {
			return fmt.Errorf("exited")
		}
		return p.err
	default:
		return nil
	}
}

// inProcess is the daemon in this process.
type inProcess struct {
	d      *daemon.Daemon
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	close  func()
}

func startInProcess(dbURL string, o Options, log *slog.Logger) (*inProcess, error) {
	cfg := config.Config{DatabaseURL: dbURL, Events: config.EventsNotify, Concurrency: o.Concurrency,
		PollEvery: 500 * time.Millisecond, MaxAttempts: 5, JobLease: o.Lease, ShutdownTimeout: 2 * time.Second,
		EmbedDim: config.DefaultEmbedDim}
	ctx := context.Background()
	pool, err := daemon.OpenPool(ctx, cfg)
	if err != nil {
		return nil, err
	}
	d, err := daemon.New(ctx, cfg, pool, log)
	if err != nil {
		pool.Close()
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	s := &inProcess{d: d, cancel: cancel, done: make(chan struct{}), close: pool.Close}
	go func() { s.err = d.Serve(sctx); close(s.done) }()
	return s, nil
}

func (s *inProcess) kill() {
	s.d.Runner.Abort()
	s.cancel()
	<-s.done
	s.close()
}

func (s *inProcess) stop() {
	s.cancel()
	<-s.done
	s.close()
}

func (s *inProcess) exited() error {
	select {
	case <-s.done:
		if s.err == nil {
			return fmt.Errorf("exited")
		}
		return s.err
	default:
		return nil
	}
}

// errorLog keeps the sidecars' warnings and errors: the report counts them
// and quotes the first five of each.
type errorLog struct {
	mu     sync.Mutex
	errors int
	warns  int
	first  []string
}

func (l *errorLog) line(name, s string) {
	s = clip.String(s, 400)
	if s == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case strings.Contains(s, "level=ERROR"):
		l.errors++
		if l.errors <= 5 {
			l.first = append(l.first, name+": "+s)
		}
	case strings.Contains(s, "level=WARN"):
		l.warns++
		if l.warns <= 5 {
			l.first = append(l.first, name+": "+s)
		}
	}
}

// writer is a process's stderr, read line by line.
func (l *errorLog) writer(name string) io.WriteCloser {
	r, w := io.Pipe()
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			l.line(name, sc.Text())
		}
		_, _ = io.Copy(io.Discard, r)
	}()
	return w
}

// logger is an in-process sidecar's log, at warn and above.
func (l *errorLog) logger(name string) *slog.Logger {
	return slog.New(slog.NewTextHandler(lineWriter{func(s string) { l.line(name, s) }}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type lineWriter struct{ f func(string) }

func (w lineWriter) Write(b []byte) (int, error) {
	for _, s := range strings.Split(string(b), "\n") {
		w.f(s)
	}
	return len(b), nil
}
