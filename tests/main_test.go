// Package tests holds mneme's integration and end-to-end tests. They run
// against a real PostgreSQL: DATABASE_URL when set (make test sets it), else
// a private cluster the harness starts for this test binary.
//
// Each file is named after the area it tests (docs/tests.md lists them):
// messages, segmentation_rules, pending_reviews, retrieval_*, context_*,
// jobs and job_*, pipeline*, revision*, lifecycle, erase_*, tenant*,
// security, planner, settings*, migrate, upgrade, transfer, citus, and
// bad_input for hostile input to every function (and the fuzz targets).
// The helpers every file shares are in helpers_test.go.
package tests

import (
	"testing"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }
