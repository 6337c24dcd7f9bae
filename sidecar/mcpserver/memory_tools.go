package mcpserver

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// addMemoryTools adds the tools that act on one memory by id.
func (s *server) addMemoryTools(srv *mcp.Server) {
	exec := func(name, desc, sql string, withReason bool) {
		if withReason {
			mcp.AddTool(srv, &mcp.Tool{Name: name, Description: desc},
				func(ctx context.Context, req *mcp.CallToolRequest, in ReasonIn) (*mcp.CallToolResult, Done, error) {
					err := s.inTenant(ctx, req, func(tx pgx.Tx) error {
						_, err := tx.Exec(ctx, sql, in.MemoryID, in.Reason)
						return err
					})
					return nil, Done{OK: err == nil}, err
				})
			return
		}
		mcp.AddTool(srv, &mcp.Tool{Name: name, Description: desc},
			func(ctx context.Context, req *mcp.CallToolRequest, in MemoryIn) (*mcp.CallToolResult, Done, error) {
				err := s.inTenant(ctx, req, func(tx pgx.Tx) error {
					_, err := tx.Exec(ctx, sql, in.MemoryID)
					return err
				})
				return nil, Done{OK: err == nil}, err
			})
	}
	exec("forget", "Invalidate a memory the user retracted (mneme.forget): it no longer comes back, "+
		"its row and history stay.", `SELECT mneme.forget($1::uuid, $2)`, true)
	exec("erase", "Delete a memory's content for good, everywhere (mneme.erase, the right to be forgotten); "+
		"a tombstone with the reason stays. Needs an operator's rights (mneme_admin).", `SELECT mneme.erase($1::uuid, $2)`, true)
	exec("pin", "Pin a memory: it never fades or is purged (mneme.pin).", `SELECT mneme.pin($1::uuid)`, false)
	exec("unpin", "Unpin a memory (mneme.unpin).", `SELECT mneme.unpin($1::uuid)`, false)

	mcp.AddTool(srv, &mcp.Tool{Name: "inspect", Description: "One memory (mneme.inspect): its status (active, merged, superseded, " +
		"invalidated, inactive), label, strength, confidence, provenance (source type, reference, source messages) and " +
		"lineage links (supersedes, superseded_by, confirms, invalidates). After remember, this shows what revision decided."},
		func(ctx context.Context, req *mcp.CallToolRequest, in MemoryIn) (*mcp.CallToolResult, InspectOut, error) {
			var out InspectOut
			err := s.inTenant(ctx, req, func(tx pgx.Tx) error {
				return tx.QueryRow(ctx, `SELECT memory_id::text, conversation_id::text, kind, status, coalesce(status_reason, ''),
					label, pinned, content, stability, review_count, confidence_score, source_type, coalesce(source_ref, ''),
					source_message_ids, coalesce(slot, ''), valid_until, last_confirmed_at, coalesce(supersedes_id::text, ''),
					coalesce(superseded_by::text, ''), coalesce(confirms_id::text, ''), coalesce(invalidates_id::text, ''),
					created_at, coalesce(revision, '') FROM mneme.inspect($1::uuid)`, in.MemoryID).Scan(
					&out.MemoryID, &out.ConversationID, &out.Kind, &out.Status, &out.StatusReason, &out.Label, &out.Pinned,
					&out.Content, &out.Stability, &out.ReviewCount, &out.Confidence, &out.SourceType, &out.SourceRef,
					&out.SourceMessageIDs, &out.Slot, &out.ValidUntil, &out.LastConfirmedAt, &out.Supersedes,
					&out.SupersededBy, &out.Confirms, &out.Invalidates, &out.CreatedAt, &out.Revision)
			})
			return nil, out, err
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "history", Description: "How a belief changed (mneme.history): the memory's lineage both ways, " +
		"oldest first, each row with its relation: replaced (an older value it superseded), replaced_by (a newer one), " +
		"confirmed_by (restatements merged into it), invalidated_by (a retraction), confirms or invalidates."},
		func(ctx context.Context, req *mcp.CallToolRequest, in MemoryIn) (*mcp.CallToolResult, HistoryOut, error) {
			out := HistoryOut{Lineage: []HistoryEntry{}}
			err := s.inTenant(ctx, req, func(tx pgx.Tx) error {
				rows, err := tx.Query(ctx, `SELECT depth, relation, memory_id::text, status, coalesce(status_reason, ''), content,
					coalesce(supersedes_id::text, ''), confidence_score, source_type, valid_until, created_at
					FROM mneme.history($1::uuid)`, in.MemoryID)
				if err != nil {
					return err
				}
				out.Lineage, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (HistoryEntry, error) {
					var h HistoryEntry
					return h, r.Scan(&h.Depth, &h.Relation, &h.MemoryID, &h.Status, &h.StatusReason, &h.Content, &h.Supersedes,
						&h.Confidence, &h.SourceType, &h.ValidUntil, &h.CreatedAt)
				})
				return err
			})
			return nil, out, err
		})
}
