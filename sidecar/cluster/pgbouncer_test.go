package cluster

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// StartPgBouncer starts and stops (twice, safely) a PgBouncer whose
// server is not even running (it connects on demand), and bad input gets a
// clear error: no server port, a pgbouncer binary that is not there, a
// pool mode PgBouncer rejects (its own message, from its log).
func TestStartPgBouncer(t *testing.T) {
	if _, err := FindPgBouncer(); err != nil {
		t.Skipf("%v", err)
	}
	ctx := context.Background()
	b, err := StartPgBouncer(ctx, PgBouncerOptions{ServerPort: 1, Users: []string{"app"}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(b.Port)), time.Second)
	if err != nil {
		t.Fatalf("pgbouncer does not listen: %v", err)
	}
	c.Close()
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := b.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := os.Stat(b.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Stop leaves %s: %v", b.Dir, err)
	}

	if _, err := StartPgBouncer(ctx, PgBouncerOptions{}); err == nil || err.Error() != "pgbouncer: the server's port is required" {
		t.Fatalf("no port: %v", err)
	}
	_, err = StartPgBouncer(ctx, PgBouncerOptions{ServerPort: 1, PoolMode: "bogus"})
	if err == nil || !containsAll(err.Error(), "pgbouncer exited at start", "bogus") {
		t.Fatalf("bad pool mode: %v", err)
	}
	t.Setenv("PGBOUNCER", "/nonexistent/pgbouncer")
	if _, err := StartPgBouncer(ctx, PgBouncerOptions{ServerPort: 1}); !errors.Is(err, ErrNoPgBouncer) {
		t.Fatalf("missing binary: %v", err)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
