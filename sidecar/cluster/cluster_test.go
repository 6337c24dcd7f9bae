package cluster

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDisposableClusterStopsWithItsOwner runs a child process that starts a
// disposable cluster and exits without stopping it; the watchdog must stop
// the server and remove its data.
func TestDisposableClusterStopsWithItsOwner(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL server")
	}
	if os.Getenv("MNEME_CLUSTER_CHILD") != "" {
		c, err := Start(context.Background(), os.Getenv("MNEME_CLUSTER_CHILD"), Options{Disposable: true})
		if err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("PORT " + c.URL("postgres") + "\n")
		os.Exit(0) // no Stop: the watchdog must do it
	}
	parent := t.TempDir()
	_ = os.Chmod(parent, 0o755)
	dir := filepath.Join(parent, "data")
	cmd := exec.Command(os.Args[0], "-test.run=^TestDisposableClusterStopsWithItsOwner$")
	cmd.Env = append(os.Environ(), "MNEME_CLUSTER_CHILD="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PORT ") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); os.IsNotExist(err) {
			return // stopped and removed
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster in %s outlived its owner", dir)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestRestartKeepsPort: a cluster stopped and started again (make demo
// twice) comes back on the same port, so its URL stays valid.
func TestRestartKeepsPort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL server")
	}
	parent := t.TempDir()
	_ = os.Chmod(parent, 0o755)
	dir := filepath.Join(parent, "data")
	ctx := context.Background()
	c, err := Start(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(ctx) })
	first := c.URL("postgres")
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := Start(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if again.URL("postgres") != first {
		t.Fatalf("restarted on %s, was %s", again.URL("postgres"), first)
	}
	_ = again.Stop(ctx)
}
