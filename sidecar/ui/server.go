// Package ui owns `mneme ui`: a small web server for looking into the
// memory (conversations, messages and episodes, memories with their FSRS
// curve, lineage, reviews and events, search and context, the job queue).
// It connects as the login the operator gives it, so row security decides
// what it shows; every read and action goes through mneme's SQL API.
// Pages are html/template, the stylesheet is embedded; no JavaScript is
// needed.
package ui

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mneme-memory/mneme/sidecar/tracing"
)

// DefaultAddr is where the server listens unless told otherwise: loopback
// only.
const DefaultAddr = "127.0.0.1:8420"

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options configure a Server.
type Options struct {
	Pool *pgxpool.Pool
	// Token, when set, is required on every request (MNEME_UI_TOKEN): the
	// header Authorization: Bearer <token>, or the cookie that ?token=
	// sets. Required on a non-loopback address.
	Token string
	Log   *slog.Logger
	// Addr is the address the server is served as (--addr): besides the
	// loopback names, the only Host a request may name (DNS rebinding: a
	// page of another site whose name resolves to this machine must not
	// read it). An unspecified address (0.0.0.0, ::) needs the token, and
	// accepts any Host.
	Addr string
	// Now is the clock of the retrievability plot; nil: time.Now.
	Now func() time.Time
}

// Server serves the pages. Create it with New.
type Server struct {
	pool  *pgxpool.Pool
	token string
	hosts hostCheck
	log   *slog.Logger
	now   func() time.Time
	tmpl  map[string]*template.Template
	// admin: the login is a member of mneme_admin, so it may choose a
	// tenant, erase and retry jobs, and read the job queue.
	admin bool
	// jobsReadable: the login may read mneme.job_stats (admin, worker).
	jobsReadable bool
	mux          *http.ServeMux
}

// New checks the database (the schema must be migrated) and what the
// login may do, and parses the templates.
func New(ctx context.Context, o Options) (*Server, error) {
	if o.Pool == nil {
		return nil, errors.New("ui: no database pool")
	}
	s := &Server{pool: o.Pool, token: o.Token, log: o.Log, now: o.Now, hosts: newHostCheck(o.Addr)}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	err := o.Pool.QueryRow(ctx, `SELECT pg_has_role(current_user, 'mneme_admin', 'MEMBER'),
	        has_table_privilege(current_user, 'mneme.jobs', 'SELECT')`).Scan(&s.admin, &s.jobsReadable)
	if err != nil {
		return nil, fmt.Errorf("ui: read the login's roles (has `mneme migrate` run?): %w", err)
	}
	if s.tmpl, err = parseTemplates(); err != nil {
		return nil, err
	}
	s.routes()
	return s, nil
}

// Handler is the server's handler, authentication included.
func (s *Server) Handler() http.Handler {
	return gzipped(s.checkHost(s.authenticate(http.HandlerFunc(s.serveMux))))
}

// serveMux serves the routes; the mux's own 404 and 405 (a URL no page
// has, a GET of an action) are rendered as the error page.
func (s *Server) serveMux(w http.ResponseWriter, r *http.Request) {
	if _, pattern := s.mux.Handler(r); pattern != "" {
		s.mux.ServeHTTP(w, r)
		return
	}
	rec := &statusOnly{header: http.Header{}, code: http.StatusOK}
	s.mux.ServeHTTP(rec, r)
	if a := rec.header.Get("Allow"); a != "" {
		w.Header().Set("Allow", a)
	}
	msg := "no page at " + r.URL.Path
	if rec.code == http.StatusMethodNotAllowed {
		msg = r.Method + " is not allowed here (" + rec.header.Get("Allow") + "): a change is a POST from its confirmation page"
	}
	s.errorPage(w, r, rec.code, msg)
}

// statusOnly keeps the status and headers the mux answers with, not its
// plain-text body (httptest stays out of the binary).
type statusOnly struct {
	header http.Header
	code   int
}

func (s *statusOnly) Header() http.Header         { return s.header }
func (s *statusOnly) Write(b []byte) (int, error) { return len(b), nil }
func (s *statusOnly) WriteHeader(code int)        { s.code = code }

func (s *Server) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /{$}", s.pageIndex)
	m.HandleFunc("GET /conversations/{id}", s.pageConversation)
	m.HandleFunc("GET /memories", s.pageMemories)
	m.HandleFunc("GET /memories/{id}", s.pageMemory)
	m.HandleFunc("GET /memories/{id}/confirm/{action}", s.pageConfirm)
	m.HandleFunc("POST /memories/{id}/{action}", s.postMemoryAction)
	m.HandleFunc("GET /search", s.pageSearch)
	m.HandleFunc("GET /jobs", s.pageJobs)
	m.HandleFunc("POST /jobs/{id}/retry", s.postRetryJob)
	m.HandleFunc("GET /usage", s.pageUsage)
	s.mux = m
}

// ErrTokenRequired: a non-loopback address without a token.
var ErrTokenRequired = errors.New("ui: a non-loopback address needs MNEME_UI_TOKEN")

// CheckAddr refuses an address other than loopback when no token is set:
// the pages show every memory of the login's tenant.
func CheckAddr(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("ui: address %q: %w", addr, err)
	}
	if token != "" || isLoopback(host) {
		return nil
	}
	return fmt.Errorf("%w: %q listens beyond this machine; set MNEME_UI_TOKEN or use 127.0.0.1", ErrTokenRequired, addr)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Serve listens on addr until ctx ends.
func Serve(ctx context.Context, addr string, o Options) error {
	if err := CheckAddr(addr, o.Token); err != nil {
		return err
	}
	o.Addr = addr
	s, err := New(ctx, o)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("ui: listen: %w", err)
	}
	srv := &http.Server{Handler: tracing.Middleware("mneme ui", s.Handler()), ReadHeaderTimeout: 10 * time.Second}
	s.log.Info("ui: serving", "url", "http://"+ln.Addr().String()+"/", "admin", s.admin, "token", o.Token != "")
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("ui: serve: %w", err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	}
}
