package ui

import (
	"testing"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// variants are the embedding variants the server has: the array fallback
// always, pgvector where installed.
func variants(t *testing.T) []string {
	v := []string{"array"}
	if dbtest.HasPgvector(t) {
		v = append(v, "pgvector")
	} else {
		t.Log("pgvector not installed on the test server: testing the array fallback only")
	}
	return v
}
