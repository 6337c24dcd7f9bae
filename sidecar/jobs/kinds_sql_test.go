package jobs

import (
	"flag"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite sql/205-job-kinds.sql from jobs.Kinds")

// kindsFile is the SQL generated from the declaration.
const kindsFile = "../../sql/205-job-kinds.sql"

// TestKindsSQL: sql/205-job-kinds.sql is what KindsSQL makes of Kinds
// today; -update rewrites it. The rows and builders it holds are tested
// against a database in tests/job_contract_test.go.
func TestKindsSQL(t *testing.T) {
	want := KindsSQL()
	if *update {
		require.NoError(t, os.WriteFile(kindsFile, []byte(want), 0o644))
	}
	got, err := os.ReadFile(kindsFile)
	require.NoError(t, err)
	require.Equal(t, want, string(got),
		"sql/205-job-kinds.sql is stale: go test ./sidecar/jobs -run TestKindsSQL -update (it is generated from jobs.Kinds)")
}

// TestKindsAreDeclaredOnce: one entry per kind, each with a builder
// field list of its own top-level fields.
func TestKindsAreDeclaredOnce(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Kinds {
		require.False(t, seen[k.Name()], "kind %s declared twice", k.Name())
		seen[k.Name()] = true
		require.NotEmpty(t, k.Description, k.Name())
		require.NotPanics(t, func() { KindsSQL() })
	}
	for _, name := range []string{KindSegment, KindReview, KindRevise, KindCleanup, KindNoop} {
		require.True(t, seen[name], name)
	}
}
