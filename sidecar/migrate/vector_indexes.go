package migrate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"

	"github.com/jackc/pgx/v5"
)

// IndexStep is one statement of mneme.vector_index_plan: a per-scope HNSW
// index to create or drop.
type IndexStep struct {
	Action    string `json:"action"` // create or drop
	Scope     string `json:"scope"`  // conversation or tenant
	ScopeID   string `json:"scope_id"`
	Memories  int64  `json:"memories"`
	Index     string `json:"index"`
	Statement string `json:"statement"`
}

// VectorIndexes reads mneme.vector_index_plan (pgvector: which
// conversations and tenants are large enough for an HNSW index of their
// own, and which such indexes are no longer wanted) and, with apply, runs
// each statement alone, outside a transaction (CREATE and DROP INDEX
// CONCURRENTLY), in the plan's order, drops first. conn must be the role
// that owns the tables. It returns the plan, and stops at the first
// statement that fails (a failed concurrent build leaves an invalid index,
// which the next plan drops and makes again).
func VectorIndexes(ctx context.Context, conn *pgx.Conn, apply bool, log *slog.Logger) ([]IndexStep, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rows, err := conn.Query(ctx, `SELECT action, scope, scope_id, memories, index_name, statement FROM mneme.vector_index_plan()`)
	if err != nil {
		return nil, fmt.Errorf("vector_index_plan: %w", err)
	}
	plan, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (IndexStep, error) {
		var s IndexStep
		return s, r.Scan(&s.Action, &s.Scope, &s.ScopeID, &s.Memories, &s.Index, &s.Statement)
	})
	if err != nil {
		return nil, fmt.Errorf("vector_index_plan: %w", err)
	}
	if !apply {
		return plan, nil
	}
	for _, s := range plan {
		log.Info("vector index", "action", s.Action, "scope", s.Scope, "id", s.ScopeID, "memories", s.Memories, "index", s.Index)
		if _, err := conn.Exec(ctx, s.Statement); err != nil {
			return plan, fmt.Errorf("%s %s (%s %s): %w", s.Action, s.Index, s.Scope, s.ScopeID, err)
		}
	}
	return plan, nil
}

// WritePlan prints a plan as one JSON array, or as its statements with
// what each is for.
func WritePlan(w io.Writer, plan []IndexStep, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(plan)
	}
	for _, s := range plan {
		fmt.Fprintf(w, "%s;  -- %s %s %s, %d memories\n", s.Statement, s.Action, s.Scope, s.ScopeID, s.Memories)
	}
	if len(plan) == 0 {
		fmt.Fprintln(w, "-- nothing to do: every scope of at least vector_scope_index_min memories has its index")
	}
	return nil
}
