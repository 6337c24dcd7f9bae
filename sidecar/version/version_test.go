package version

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The SQL API version is read from the embedded sql/000-core.sql, and the
// binary's is semantic, with the commit as build metadata.
func TestVersions(t *testing.T) {
	require.Regexp(t, `^\d+\.\d+\.\d+$`, SQLAPI())
	require.Regexp(t, `^\d+\.\d+\.\d+$`, Release)
	old := Commit
	t.Cleanup(func() { Commit = old })
	Commit = ""
	require.Equal(t, Release, Binary())
	Commit = "aa5f1e0-dirty"
	require.Equal(t, Release+"+aa5f1e0-dirty", Binary())
}

// Compatible accepts the same major either way and refuses another, naming
// both versions and what to run.
func TestCompatible(t *testing.T) {
	require.NoError(t, Compatible("1.0.0", "1.0.0"))
	require.NoError(t, Compatible("1.0.0", "1.4.2"))
	require.NoError(t, Compatible("1.3.0", "1.0.0"))
	err := Compatible("2.0.0", "1.7.0")
	require.ErrorIs(t, err, ErrIncompatible)
	require.ErrorContains(t, err, "the database's SQL API is 1.7.0")
	require.ErrorContains(t, err, "speaks 2.0.0")
	require.ErrorContains(t, err, "mneme migrate")
	err = Compatible("1.0.0", "2.0.0")
	require.ErrorIs(t, err, ErrIncompatible)
	require.ErrorContains(t, err, "run that release's sidecar")
	require.ErrorIs(t, Compatible("1.0.0", "bogus"), ErrIncompatible)
}
