// Package mcpserver serves mneme's SQL API as Model Context Protocol tools
// (mneme mcp), on the official Go SDK, over stdio or streamable HTTP. Each
// tool is one call of a SQL function in a transaction of the caller's
// tenant (mneme.set_tenant), so row-level security decides what it sees.
package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mneme-memory/mneme/client"
	"github.com/mneme-memory/mneme/sidecar/tracing"
)

// Options configure a server.
type Options struct {
	Pool *pgxpool.Pool
	// Tenant is the tenant of every call that carries no bearer token's
	// (stdio); "" is the default tenant.
	Tenant  string
	Version string
	Log     *slog.Logger
	// Embedder embeds the queries of recall and search when the database's
	// embeddings come from an external embedder (nil: SQL embeds them with
	// the built-in hash embedder, or searches by BM25 alone).
	Embedder QueryEmbedder
}

// QueryEmbedder is the external embedder as the tools use it.
type QueryEmbedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// server holds what the tool handlers share.
type server struct {
	mneme  *client.Client
	tenant string
	log    *slog.Logger
	embed  QueryEmbedder
}

// queryEmbedding is the query's vector from the external embedder, before
// any transaction opens; nil (SQL NULL) without one.
func (s *server) queryEmbedding(ctx context.Context, query string) ([]float32, error) {
	if s.embed == nil {
		return nil, nil
	}
	v, err := s.embed.Embed(ctx, []string{query})
	if err != nil {
		return nil, fmt.Errorf("embed the query: %w", err)
	}
	if len(v) != 1 {
		return nil, fmt.Errorf("embed the query: the embedder returned %d vectors for one text", len(v))
	}
	return v[0], nil
}

// New returns the MCP server with every mneme tool.
func New(o Options) *mcp.Server {
	s := &server{mneme: client.New(o.Pool), tenant: o.Tenant, log: o.Log, embed: o.Embedder}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "mneme", Title: "mneme: long-term memory in PostgreSQL", Version: o.Version},
		&mcp.ServerOptions{Instructions: instructions})
	s.addTools(srv)
	srv.AddReceivingMiddleware(s.trace)
	return srv
}

// trace gives every request the client sends (a tool call, a list) a
// span, over stdio and HTTP alike; a no-op one when tracing is off.
func (s *server) trace(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		name := "mcp " + method
		attrs := []attribute.KeyValue{attribute.String("rpc.system", "mcp"), attribute.String("rpc.method", method)}
		if call, ok := req.(*mcp.CallToolRequest); ok && call.Params != nil {
			name += " " + call.Params.Name
			attrs = append(attrs, attribute.String("mcp.tool", call.Params.Name), attribute.String("mneme.tenant", s.tenantOf(call)))
		}
		ctx, span := tracing.Tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
		res, err := next(ctx, method, req)
		if r, ok := res.(*mcp.CallToolResult); ok && err == nil && r.IsError {
			span.SetStatus(codes.Error, "tool error")
		}
		tracing.End(span, err)
		return res, err
	}
}

const instructions = `mneme is long-term memory for this conversation. Call add_message with every message ` +
	`of the conversation (user and assistant), under one conversation_id you keep. Before answering, call recall ` +
	`with what you need to know: it returns the relevant past turns and facts as markdown within a word budget. ` +
	`Use remember for facts worth keeping explicitly (mneme revises each against what it already knows: a changed ` +
	`value supersedes the old one, a restatement confirms it), forget when the user retracts one, erase when the ` +
	`user asks for it to be deleted for good.`

// tenantOf is the tenant of a call: the bearer token's (HTTP), else the
// configured one (stdio).
func (s *server) tenantOf(req *mcp.CallToolRequest) string {
	if req != nil && req.Extra != nil && req.Extra.TokenInfo != nil && req.Extra.TokenInfo.UserID != "" {
		return req.Extra.TokenInfo.UserID
	}
	return s.tenant
}

// client is the mneme client of a call: its tenant's (each call one
// transaction that sets it, so row-level security decides what it sees).
func (s *server) client(req *mcp.CallToolRequest) *client.Client {
	return s.mneme.WithTenant(s.tenantOf(req))
}

// done logs a tool's error and turns it into the message, SQLSTATE and
// hint the client's model can act on (a tool error, not a protocol
// failure).
func (s *server) done(req *mcp.CallToolRequest, err error) error {
	if err == nil {
		return nil
	}
	s.log.Info("mcp tool error", "tool", req.Params.Name, "err", err)
	var me *client.Error
	if errors.As(err, &me) {
		msg := fmt.Sprintf("%s (SQLSTATE %s)", me.Message, me.SQLState)
		if me.Hint != "" {
			msg += "; hint: " + me.Hint
		}
		return errors.New(msg)
	}
	return err
}
