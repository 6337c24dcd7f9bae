package soak

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// logins are the roles a soak run connects as: one mneme_app login per
// tenant, bound to it (the "one login per customer" deployment: its calls
// need no set_tenant), one mneme_worker login for the sidecars, and one
// mneme_admin login for the erases (an operator's call, made in the
// memory's tenant).
type logins struct {
	tenantURLs []string
	workerURL  string
	adminURL   string
	roles      []string
}

// settings the soak runs under: a short gap on a compressed clock (the
// rules are the same at any scale), and a small pending_reviews_max so the
// overflow path (add_pending_review hands the oldest to a review job) runs
// too.
func applySettings(ctx context.Context, pool *pgxpool.Pool, o Options) error {
	for k, v := range map[string]string{
		"segment_gap_seconds": strconv.FormatFloat(o.Gap.Seconds(), 'f', -1, 64),
		"pending_reviews_max": "8",
	} {
		if _, err := pool.Exec(ctx, `SELECT mneme.set_setting($1, $2::jsonb)`, k, v); err != nil {
			return fmt.Errorf("set %s: %w", k, err)
		}
	}
	return nil
}

// createLogins creates the tenants and the run's logins (dropped by drop).
func createLogins(ctx context.Context, pool *pgxpool.Pool, dbURL string, tenants int) (*logins, error) {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	suffix := hex.EncodeToString(b)
	l := &logins{}
	role := func(name, group string) (string, error) {
		if _, err := pool.Exec(ctx, fmt.Sprintf(`CREATE ROLE %s LOGIN IN ROLE %s`, pgx.Identifier{name}.Sanitize(), group)); err != nil {
			return "", fmt.Errorf("create login %s (the soak needs CREATEROLE): %w", name, err)
		}
		l.roles = append(l.roles, name)
		u, err := url.Parse(dbURL)
		if err != nil {
			return "", fmt.Errorf("DATABASE_URL must be a URL for the soak: %w", err)
		}
		u.User = url.User(name)
		return u.String(), nil
	}
	var err error
	if l.workerURL, err = role("mneme_soak_worker_"+suffix, "mneme_worker"); err != nil {
		return l, err
	}
	if l.adminURL, err = role("mneme_soak_admin_"+suffix, "mneme_admin"); err != nil {
		return l, err
	}
	for i := range tenants {
		tenant := tenantName(i)
		if _, err := pool.Exec(ctx, `SELECT mneme.create_tenant($1)`, tenant); err != nil {
			return l, fmt.Errorf("create tenant %s: %w", tenant, err)
		}
		name := fmt.Sprintf("mneme_soak_app%d_%s", i, suffix)
		u, err := role(name, "mneme_app")
		if err != nil {
			return l, err
		}
		if _, err := pool.Exec(ctx, `SELECT mneme.bind_login($1, $2)`, name, tenant); err != nil {
			return l, fmt.Errorf("bind %s to %s: %w", name, tenant, err)
		}
		l.tenantURLs = append(l.tenantURLs, u)
	}
	return l, nil
}

// drop removes the run's logins (after the scratch database is gone or its
// sessions closed: a role with sessions cannot be dropped).
func (l *logins) drop(ctx context.Context, server string) {
	if l == nil || len(l.roles) == 0 {
		return
	}
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	for _, r := range l.roles {
		_, _ = conn.Exec(ctx, `DROP ROLE IF EXISTS `+pgx.Identifier{r}.Sanitize())
	}
}

func tenantName(i int) string { return fmt.Sprintf("soak_t%d", i) }
