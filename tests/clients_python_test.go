package tests

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The Python package mneme_client (clients/python) with its own tests
// (pytest, Debian's python3-pytest): every function sync and async, the
// typed error, the version check, tenants, the LangGraph store and the
// OpenAI Agents SDK session against those frameworks' method contracts
// (Debian has neither framework), and the offline wheel build. Both
// vector variants, directly and through PgBouncer in transaction
// pooling.
func TestPythonClient(t *testing.T) {
	t.Parallel()
	python := pythonWithPsycopg(t)
	if out, err := runQuiet(python, "-c", "import pytest"); err != nil {
		t.Fatalf("%s has no pytest: install Debian's python3-pytest (make test does, scripts/test-deps.sh): %s", python, out)
	}
	dir, err := filepath.Abs(filepath.Join("..", "clients", "python"))
	require.NoError(t, err)
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			for via, env := range clientPackageDBs(t, variant) {
				t.Run(via, func(t *testing.T) {
					out := runPackageTests(t, dir, append(env, "PYTHONDONTWRITEBYTECODE=1"),
						python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests")
					t.Log(out)
					require.Contains(t, out, " passed")
					require.NotContains(t, out, "failed")
				})
			}
		})
	}
}
