package daemon

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/jobs"
	"github.com/mneme-memory/mneme/sidecar/pipeline"
)

// TestHandlersBindEveryDeclaredKind: Handlers binds exactly the kinds of
// jobs.Kinds, and RegisterAll refuses a binding that misses a declared
// kind or names an undeclared one (so a kind added to the declaration
// alone fails here and at the sidecar's start).
func TestHandlersBindEveryDeclaredKind(t *testing.T) {
	p, err := pipeline.New(pipeline.Deps{Embedder: embed.NewHash(config.DefaultEmbedDim)})
	require.NoError(t, err)
	hs := Handlers(p, nil)
	r := jobs.NewRunner(nil, jobs.Options{})
	require.NoError(t, r.RegisterAll(hs))
	var declared []string
	for _, k := range jobs.Kinds {
		declared = append(declared, k.Name())
	}
	slices.Sort(declared)
	require.Equal(t, declared, r.Kinds())

	missing := maps.Clone(hs)
	delete(missing, jobs.KindCleanup)
	require.ErrorContains(t, jobs.NewRunner(nil, jobs.Options{}).RegisterAll(missing), "job kinds without a handler: cleanup")
	extra := maps.Clone(hs)
	extra["dream"] = noop
	require.ErrorContains(t, jobs.NewRunner(nil, jobs.Options{}).RegisterAll(extra), "handlers for undeclared job kinds: dream")
}
