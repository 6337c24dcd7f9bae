// Package tests holds mneme's integration and end-to-end tests. They run
// against a real PostgreSQL: DATABASE_URL when set (make test sets it), else
// a private cluster the harness starts for this test binary.
package tests

import (
	"testing"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }
