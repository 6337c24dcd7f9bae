package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/client"
	"github.com/mneme-memory/mneme/sidecar/pgtime"
)

// tenantOf is the tenant the request chose (?tenant= or the form's
// tenant field), "" for the login's own (a bound login's, or the default).
func tenantOf(r *http.Request) string {
	if r.Method == http.MethodPost {
		return strings.TrimSpace(r.PostFormValue("tenant"))
	}
	return strings.TrimSpace(r.URL.Query().Get("tenant"))
}

// inTx runs fn in one transaction of the request's tenant: every read of a
// page sees one snapshot, and an action commits with its checks or not at
// all. A bound login that names another tenant gets 42501 from
// mneme.set_tenant.
func (s *Server) inTx(ctx context.Context, r *http.Request, readOnly bool, fn func(pgx.Tx) error) error {
	mode := pgx.ReadWrite
	if readOnly {
		mode = pgx.ReadOnly
	}
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: mode}, func(tx pgx.Tx) error {
		pgtime.Register(tx.Conn().TypeMap()) // a row at 'infinity' reads, not a 500
		if t := tenantOf(r); t != "" {
			if err := client.InTx(tx).SetTenant(ctx, t); err != nil {
				return fmt.Errorf("set tenant %q: %w", t, err)
			}
		}
		return fn(tx)
	})
}

// statusOf maps an error to the HTTP status a page answers with: the
// SQLSTATEs of docs/sql-api.md.
func statusOf(err error) int {
	code := client.SQLState(err)
	if code == "" {
		if errors.Is(err, errNotFound) {
			return http.StatusNotFound
		}
		if errors.Is(err, errBadRequest) {
			return http.StatusBadRequest
		}
		return http.StatusInternalServerError
	}
	switch {
	case code == "P0002":
		return http.StatusNotFound
	case code == "42501":
		return http.StatusForbidden
	case code == "23505" || code == "55000":
		return http.StatusConflict
	case strings.HasPrefix(code, "22"):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

var (
	errNotFound   = errors.New("not found")
	errBadRequest = errors.New("bad request")
)
