package mcpserver

import (
	"context"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mneme-memory/mneme/client"
)

// idString is a nullable id as the tools' JSON has it ("" for none).
func idString(id *uuid.UUID) string {
	if id == nil {
		return ""
	}
	return id.String()
}

// addMemoryTools adds the tools that act on one memory by id.
func (s *server) addMemoryTools(srv *mcp.Server) {
	withReason := func(name, desc string, fn func(*client.Client, context.Context, uuid.UUID, string) error) {
		mcp.AddTool(srv, &mcp.Tool{Name: name, Description: desc},
			func(ctx context.Context, req *mcp.CallToolRequest, in ReasonIn) (*mcp.CallToolResult, Done, error) {
				id, err := client.ParseID("memory_id", in.MemoryID)
				if err == nil {
					err = fn(s.client(req), ctx, id, in.Reason)
				}
				return nil, Done{OK: err == nil}, s.done(req, err)
			})
	}
	byID := func(name, desc string, fn func(*client.Client, context.Context, uuid.UUID) error) {
		mcp.AddTool(srv, &mcp.Tool{Name: name, Description: desc},
			func(ctx context.Context, req *mcp.CallToolRequest, in MemoryIn) (*mcp.CallToolResult, Done, error) {
				id, err := client.ParseID("memory_id", in.MemoryID)
				if err == nil {
					err = fn(s.client(req), ctx, id)
				}
				return nil, Done{OK: err == nil}, s.done(req, err)
			})
	}
	withReason("forget", "Invalidate a memory the user retracted (mneme.forget): it no longer comes back, "+
		"its row and history stay.", (*client.Client).Forget)
	withReason("erase", "Delete a memory's content for good, everywhere (mneme.erase, the right to be forgotten); "+
		"a tombstone with the reason stays. Needs an operator's rights (mneme_admin).", (*client.Client).Erase)
	byID("pin", "Pin a memory: it never fades or is purged (mneme.pin).", (*client.Client).Pin)
	byID("unpin", "Unpin a memory (mneme.unpin).", (*client.Client).Unpin)

	mcp.AddTool(srv, &mcp.Tool{Name: "inspect", Description: "One memory (mneme.inspect): its status (active, merged, superseded, " +
		"invalidated, inactive), label, strength, confidence, provenance (source type, reference, source messages) and " +
		"lineage links (supersedes, superseded_by, confirms, invalidates). After remember, this shows what revision decided."},
		func(ctx context.Context, req *mcp.CallToolRequest, in MemoryIn) (*mcp.CallToolResult, InspectOut, error) {
			id, err := client.ParseID("memory_id", in.MemoryID)
			if err != nil {
				return nil, InspectOut{}, s.done(req, err)
			}
			i, err := s.client(req).Inspect(ctx, id)
			if err != nil {
				return nil, InspectOut{}, s.done(req, err)
			}
			return nil, InspectOut{
				MemoryID: i.MemoryID.String(), ConversationID: i.ConversationID.String(), Kind: i.Kind, Status: i.Status,
				StatusReason: i.StatusReason, Label: i.Label, Pinned: i.Pinned, Content: i.Content, Stability: i.Stability,
				ReviewCount: int(i.ReviewCount), Confidence: float64(i.ConfidenceScore), SourceType: i.SourceType,
				SourceRef: i.SourceRef, SourceMessageIDs: i.SourceMessageIDs, Slot: i.Slot, Revision: i.Revision,
				ValidUntil: i.ValidUntil, LastConfirmedAt: i.LastConfirmedAt, Supersedes: idString(i.SupersedesID),
				SupersededBy: idString(i.SupersededBy), Confirms: idString(i.ConfirmsID), Invalidates: idString(i.InvalidatesID),
				CreatedAt: i.CreatedAt,
			}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "history", Description: "How a belief changed (mneme.history): the memory's lineage both ways, " +
		"oldest first, each row with its relation: replaced (an older value it superseded), replaced_by (a newer one), " +
		"confirmed_by (restatements merged into it), invalidated_by (a retraction), confirms or invalidates."},
		func(ctx context.Context, req *mcp.CallToolRequest, in MemoryIn) (*mcp.CallToolResult, HistoryOut, error) {
			out := HistoryOut{Lineage: []HistoryEntry{}}
			id, err := client.ParseID("memory_id", in.MemoryID)
			if err != nil {
				return nil, out, s.done(req, err)
			}
			hist, err := s.client(req).History(ctx, id)
			for _, h := range hist {
				out.Lineage = append(out.Lineage, HistoryEntry{Depth: int(h.Depth), Relation: h.Relation, MemoryID: h.MemoryID.String(),
					Status: h.Status, StatusReason: h.StatusReason, Content: h.Content, Supersedes: idString(h.SupersedesID),
					Confidence: float64(h.ConfidenceScore), SourceType: h.SourceType, ValidUntil: h.ValidUntil, CreatedAt: h.CreatedAt})
			}
			return nil, out, s.done(req, err)
		})
}
