package bench

import (
	"flag"
	"fmt"

	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/config"
)

// Server is the server (DATABASE_URL) a benchmark makes its scratch
// database on; name is the benchmark's, for the error.
func Server(name string) (string, error) {
	cfg, err := config.FromEnv()
	if err == nil && cfg.DatabaseURL == "" {
		err = fmt.Errorf("DATABASE_URL is not set: run ./scripts/with-test-db.sh bin/mneme-lab bench %s", name)
	}
	return cfg.DatabaseURL, err
}

// Setup is what every bench command does before it runs: parse its flags,
// check its options (a usage error) and find the server its scratch
// database goes on.
func Setup(name string, fs *flag.FlagSet, args []string, validate func() error, server *string) error {
	if err := cli.Parse(fs, args, false); err != nil {
		return err
	}
	if err := validate(); err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	var err error
	*server, err = Server(name)
	return err
}
