package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RLSResult compares mneme.retrieve called by the benchmark's superuser
// (the row policies pass every row: the sidecar's view) with the same
// queries from an application role (mneme_app) in the conversation's tenant,
// where row-level security filters by tenant.
type RLSResult struct {
	Tenants   int       `json:"tenants"`
	Superuser Latencies `json:"retrieve_superuser"`
	App       Latencies `json:"retrieve_app_rls"`
}

// tenantOf is conversation i's tenant when they are spread over n.
func tenantOf(i, n int) string { return fmt.Sprintf("t%d", i%n) }

// loadTenants creates n tenants and gives conversation i to tenant i % n
// (its queue row; its memories follow it when they are inserted).
func loadTenants(ctx context.Context, conn *pgx.Conn, c *benchCorpus, n int) error {
	if _, err := conn.Exec(ctx, `SELECT mneme.create_tenant('t' || g) FROM generate_series(0, $1 - 1) g`, n); err != nil {
		return fmt.Errorf("create tenants: %w", err)
	}
	ids := make([]string, len(c.convs))
	tenants := make([]string, len(c.convs))
	for i, id := range c.convs {
		ids[i], tenants[i] = id.String(), tenantOf(i, n)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO mneme.message_queue (id, tenant_id)
		SELECT * FROM unnest($1::uuid[], $2::text[])`, ids, tenants); err != nil {
		return fmt.Errorf("assign conversations to tenants: %w", err)
	}
	return nil
}

// runRLSBench times retrieve as the superuser and as a mneme_app login role
// (created for the run, dropped after) in the query's tenant, interleaved.
func runRLSBench(ctx context.Context, conn *pgx.Conn, dbURL string, c *benchCorpus, tenants, queries int) (*RLSResult, error) {
	app, done, err := scaleApp(ctx, conn, dbURL)
	if err != nil {
		return nil, err
	}
	defer done()

	warmup := min(10, 1+queries/5)
	qs, err := makeQueries(c, queries+warmup)
	if err != nil {
		return nil, err
	}
	const retrieve = `SELECT count(*) FROM mneme.retrieve($1, $2, 10, $3)`
	var su, ap []float64
	for i, q := range qs {
		t0 := time.Now()
		var n int
		if err := conn.QueryRow(ctx, retrieve, q.conv, q.text, q.emb).Scan(&n); err != nil {
			return nil, fmt.Errorf("retrieve as superuser: %w", err)
		}
		d := time.Since(t0)
		var m int
		var da time.Duration
		err := pgx.BeginFunc(ctx, app, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT mneme.set_tenant($1)`, tenantOf(q.convI, tenants)); err != nil {
				return err
			}
			t1 := time.Now()
			err := tx.QueryRow(ctx, retrieve, q.conv, q.text, q.emb).Scan(&m)
			da = time.Since(t1)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("retrieve as the application role: %w", err)
		}
		if m != n {
			return nil, fmt.Errorf("the application role saw %d memories, the superuser %d, for a query in its own tenant", m, n)
		}
		if i >= warmup {
			su = append(su, float64(d.Microseconds())/1000)
			ap = append(ap, float64(da.Microseconds())/1000)
		}
		if i%10 == 0 {
			if _, err := conn.Exec(ctx, `UPDATE mneme.message_queue SET pending_reviews = NULL WHERE pending_reviews IS NOT NULL`); err != nil {
				return nil, err
			}
		}
	}
	return &RLSResult{Tenants: tenants, Superuser: percentiles(su), App: percentiles(ap)}, nil
}
