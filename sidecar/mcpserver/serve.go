package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mneme-memory/mneme/client"
	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/tracing"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Transport is how Serve talks to clients.
type Transport struct {
	Kind   string // stdio or http
	Addr   string // http: listen address
	Tokens Tokens // http: bearer tokens by hash
}

// ParseTransport checks the transport flags (before anything is opened):
// http needs a tokens file.
func ParseTransport(kind, addr, tokensFile string) (Transport, error) {
	t := Transport{Kind: kind, Addr: addr}
	switch kind {
	case "stdio":
		return t, nil
	case "http":
		if tokensFile == "" {
			return t, errors.New("--transport http needs --tokens FILE (mneme mcp --new-token TENANT makes a line)")
		}
		var err error
		t.Tokens, err = LoadTokens(tokensFile)
		return t, err
	}
	return t, fmt.Errorf("--transport %q: want stdio or http", kind)
}

// Serve runs the server until ctx ends (stdio: until the client closes).
func Serve(ctx context.Context, o Options, t Transport) error {
	srv := New(o)
	if t.Kind == "stdio" {
		return srv.Run(ctx, &mcp.StdioTransport{})
	}
	hs := &http.Server{Addr: t.Addr, Handler: tracing.Middleware("mneme mcp", HTTPHandler(srv, t.Tokens)), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	if o.Log != nil {
		o.Log.Info("mneme mcp: streamable HTTP", "addr", t.Addr, "tokens", len(t.Tokens))
	}
	if err := hs.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// ExternalEmbedder is the query embedder for an external embedding
// endpoint (config MNEME_EMBED_*): it embeds the queries as the sidecar
// embeds the memories, at the database's dimension. Nil when none is
// configured (SQL embeds queries with the hash embedder, or searches by
// BM25 alone).
func ExternalEmbedder(ctx context.Context, pool *pgxpool.Pool, ep config.Endpoint, log *slog.Logger) (QueryEmbedder, error) {
	if !ep.Configured() {
		return nil, nil
	}
	raw, err := client.New(pool).Setting(ctx, "embedding_dim")
	if err != nil {
		return nil, fmt.Errorf("read the embedding dimension (has `mneme migrate` run?): %w", err)
	}
	var dim int
	if err := json.Unmarshal(raw, &dim); err != nil {
		return nil, fmt.Errorf("setting embedding_dim %s: %w", raw, err)
	}
	if log != nil {
		log.Info("mcp: queries embedded by the external embedder", "base_url", ep.BaseURL, "model", ep.Model)
	}
	return embed.NewOpenAI(ep, dim), nil
}

// CheckStart refuses, before serving, what would otherwise fail only at
// the first tool call: a tenant (MNEME_MCP_TENANT, or a tokens file's)
// that does not exist or that the login may not act for (a login bound to
// another tenant), and a database whose embedder is external when no
// MNEME_EMBED_* endpoint is configured here to embed the queries.
func CheckStart(ctx context.Context, pool *pgxpool.Pool, tenants []string, embedConfigured bool) error {
	var errs []error
	m := client.New(pool)
	for _, t := range tenants {
		if t == "" {
			continue
		}
		// A transaction of the tenant: Tx calls mneme.set_tenant, which
		// refuses an unknown tenant or one the login may not act for.
		if err := m.WithTenant(t).Tx(ctx, func(*client.Client) error { return nil }); err != nil {
			errs = append(errs, fmt.Errorf("tenant %q: %w", t, err))
		}
	}
	var embedder string
	if raw, err := m.Setting(ctx, "embedder"); err != nil {
		errs = append(errs, fmt.Errorf("read the setting embedder (has `mneme migrate` run?): %w", err))
	} else if err := json.Unmarshal(raw, &embedder); err != nil {
		errs = append(errs, fmt.Errorf("setting embedder %s: %w", raw, err))
	} else if embedder != "hash" && !embedConfigured {
		errs = append(errs, fmt.Errorf("the database's setting embedder is %q but MNEME_EMBED_BASE_URL is unset: "+
			"set MNEME_EMBED_BASE_URL, MNEME_EMBED_MODEL (and MNEME_EMBED_API_KEY) as for the sidecar, so that queries are embedded", embedder))
	}
	return errors.Join(errs...)
}
