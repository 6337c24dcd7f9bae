package bench

import (
	"fmt"

	"github.com/mneme-memory/mneme/sidecar/config"
)

// Server is the server (DATABASE_URL) a benchmark makes its scratch
// database on; name is the benchmark's, for the error.
func Server(name string) (string, error) {
	cfg, err := config.FromEnv()
	if err == nil && cfg.DatabaseURL == "" {
		err = fmt.Errorf("DATABASE_URL is not set: run ./scripts/with-test-db.sh bin/mneme bench %s", name)
	}
	return cfg.DatabaseURL, err
}
