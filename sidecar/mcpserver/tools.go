package mcpserver

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mneme-memory/mneme/client"
)

// Tool inputs and outputs: their JSON schemas (from these types) are what
// the client's model reads.
type (
	AddMessageIn struct {
		ConversationID string `json:"conversation_id" jsonschema:"the conversation: a UUID you choose once and reuse for every message of it"`
		Role           string `json:"role" jsonschema:"user, assistant, system, tool, or a speaker name registered for the conversation"`
		Content        string `json:"content" jsonschema:"the message text"`
		At             string `json:"at,omitempty" jsonschema:"when it was said, RFC 3339; default: now"`
	}
	AddMessageOut struct {
		MessageID int64 `json:"message_id"`
	}
	RecallIn struct {
		ConversationID string `json:"conversation_id" jsonschema:"the conversation asking"`
		Query          string `json:"query" jsonschema:"what you need to know, in plain words (the user's question works)"`
		Budget         int    `json:"budget,omitempty" jsonschema:"most words to return (1 to 100000); default 1000"`
		Scope          string `json:"scope,omitempty" jsonschema:"conversation (default) or tenant: every conversation of this user"`
	}
	RecallOut struct {
		Context string `json:"context" jsonschema:"markdown: past turns under their dates, facts as a list; empty when nothing is remembered"`
	}
	SearchIn struct {
		ConversationID string `json:"conversation_id"`
		Query          string `json:"query"`
		K              int    `json:"k,omitempty" jsonschema:"how many memories (1 to 100); default 5"`
		Scope          string `json:"scope,omitempty" jsonschema:"conversation (default) or tenant"`
	}
	Memory struct {
		MemoryID  string    `json:"memory_id"`
		Kind      string    `json:"kind" jsonschema:"episodic (a stretch of conversation) or semantic (a fact)"`
		Label     string    `json:"label"`
		Summary   string    `json:"summary,omitempty"`
		Content   string    `json:"content"`
		Score     float64   `json:"score"`
		CreatedAt time.Time `json:"created_at"`
	}
	SearchOut struct {
		Memories []Memory `json:"memories"`
	}
	RememberIn struct {
		ConversationID string `json:"conversation_id"`
		Content        string `json:"content" jsonschema:"the fact, as a self-contained sentence"`
		Label          string `json:"label,omitempty" jsonschema:"trivial, temporary, general, user_profile, important or project_<name>; default: chosen from the text"`
		Supersedes     string `json:"supersedes,omitempty" jsonschema:"only when you know it: the memory_id of the belief this one replaces (kept as superseded, applied at once). Leave it out otherwise: mneme revises every write against the closest facts itself"`
	}
	RememberOut struct {
		MemoryID string `json:"memory_id"`
		Revision string `json:"revision" jsonschema:"queued: mneme's revise job will classify the write against the closest facts (ADD, NOOP, SUPERSEDE or INVALIDATE) after this call returns; applied: supersedes was given and the old belief is superseded already"`
		// Action is set only when the caller's supersedes decided it; a
		// queued revision's action is known once the sidecar ran it.
		Action     string `json:"action,omitempty" jsonschema:"SUPERSEDE when supersedes was given; absent while revision is queued"`
		Supersedes string `json:"supersedes,omitempty"`
	}
	MemoryIn struct {
		MemoryID string `json:"memory_id"`
	}
	ReasonIn struct {
		MemoryID string `json:"memory_id"`
		Reason   string `json:"reason" jsonschema:"why, kept with the memory's history"`
	}
	Done struct {
		OK bool `json:"ok"`
	}
	InspectOut struct {
		MemoryID         string     `json:"memory_id"`
		ConversationID   string     `json:"conversation_id"`
		Kind             string     `json:"kind"`
		Status           string     `json:"status" jsonschema:"active; merged (a restatement: see confirms); superseded; invalidated; inactive (faded)"`
		StatusReason     string     `json:"status_reason,omitempty"`
		Label            string     `json:"label"`
		Pinned           bool       `json:"pinned"`
		Content          string     `json:"content"`
		Stability        float64    `json:"stability_days"`
		ReviewCount      int        `json:"review_count"`
		Confidence       float64    `json:"confidence" jsonschema:"0 to 1: set by the source, raised each time the fact is restated"`
		SourceType       string     `json:"source_type" jsonschema:"explicit (remember), extracted (from a conversation), conversation (an episode) or import"`
		SourceRef        string     `json:"source_ref,omitempty"`
		SourceMessageIDs []int64    `json:"source_message_ids,omitempty"`
		Slot             string     `json:"slot,omitempty" jsonschema:"subject|attribute the fact fills, when revision recognised one"`
		Revision         string     `json:"revision,omitempty" jsonschema:"what its revise job decided (ADD, NOOP, SUPERSEDE or INVALIDATE, by whom, why); empty until the job ran"`
		ValidUntil       *time.Time `json:"valid_until,omitempty"`
		LastConfirmedAt  *time.Time `json:"last_confirmed_at,omitempty"`
		Supersedes       string     `json:"supersedes,omitempty"`
		SupersededBy     string     `json:"superseded_by,omitempty"`
		Confirms         string     `json:"confirms,omitempty" jsonschema:"the memory this restatement reconfirmed (revision NOOP)"`
		Invalidates      string     `json:"invalidates,omitempty" jsonschema:"the memory this one retracted (revision INVALIDATE)"`
		CreatedAt        time.Time  `json:"created_at"`
	}
	HistoryEntry struct {
		Depth        int        `json:"depth" jsonschema:"0 is the memory asked about; negative: older beliefs it replaced, positive: newer ones"`
		Relation     string     `json:"relation" jsonschema:"self, replaced, replaced_by, confirmed_by, invalidated_by, confirms or invalidates: how this row relates to the lineage link at its depth"`
		MemoryID     string     `json:"memory_id"`
		Status       string     `json:"status"`
		StatusReason string     `json:"status_reason,omitempty"`
		Content      string     `json:"content"`
		Supersedes   string     `json:"supersedes,omitempty"`
		Confidence   float64    `json:"confidence"`
		SourceType   string     `json:"source_type"`
		ValidUntil   *time.Time `json:"valid_until,omitempty"`
		CreatedAt    time.Time  `json:"created_at"`
	}
	HistoryOut struct {
		Lineage []HistoryEntry `json:"lineage"`
	}
)

// parseAt is add_message's optional time, RFC 3339 ("" : now).
func parseAt(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, &client.Error{Op: "parse", SQLState: "22007", Message: fmt.Sprintf("at: %q is not an RFC 3339 time", s)}
	}
	return at, nil
}

func (s *server) addTools(srv *mcp.Server) {
	mcp.AddTool(srv, &mcp.Tool{Name: "add_message", Description: "Append one message to a conversation's memory (mneme.add_message). " +
		"Call it for every user and assistant message; mneme segments them into episodes in the background."},
		func(ctx context.Context, req *mcp.CallToolRequest, in AddMessageIn) (*mcp.CallToolResult, AddMessageOut, error) {
			var out AddMessageOut
			conv, err := client.ParseID("conversation_id", in.ConversationID)
			if err != nil {
				return nil, out, s.done(req, err)
			}
			at, err := parseAt(in.At)
			if err != nil {
				return nil, out, s.done(req, err)
			}
			out.MessageID, err = s.client(req).AddMessageAt(ctx, conv, in.Role, in.Content, at)
			return nil, out, s.done(req, err)
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "recall", Description: "What you should know to answer, from this conversation's memory: " +
		"the past turns and facts that match the query, as markdown within a word budget (mneme.context). " +
		"mneme later rates whether what it returned was used, so useful memories strengthen."},
		func(ctx context.Context, req *mcp.CallToolRequest, in RecallIn) (*mcp.CallToolResult, RecallOut, error) {
			var out RecallOut
			conv, err := client.ParseID("conversation_id", in.ConversationID)
			if err != nil {
				return nil, out, s.done(req, err)
			}
			emb, err := s.queryEmbedding(ctx, in.Query)
			if err != nil {
				return nil, out, err
			}
			out.Context, err = s.client(req).Context(ctx, conv, in.Query,
				client.ContextOptions{Budget: in.Budget, Scope: in.Scope, QueryEmbedding: emb})
			if err != nil {
				return nil, RecallOut{}, s.done(req, err)
			}
			text := out.Context
			if text == "" {
				text = "(nothing remembered matches)"
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "search", Description: "Rank the conversation's memories for a query (mneme.search): " +
		"structured results with scores, no side effects. Prefer recall to build an answer."},
		func(ctx context.Context, req *mcp.CallToolRequest, in SearchIn) (*mcp.CallToolResult, SearchOut, error) {
			out := SearchOut{Memories: []Memory{}}
			conv, err := client.ParseID("conversation_id", in.ConversationID)
			if err != nil {
				return nil, out, s.done(req, err)
			}
			emb, err := s.queryEmbedding(ctx, in.Query)
			if err != nil {
				return nil, out, err
			}
			hits, err := s.client(req).Search(ctx, conv, in.Query, client.SearchOptions{K: in.K, Scope: in.Scope, QueryEmbedding: emb})
			for _, h := range hits {
				out.Memories = append(out.Memories, Memory{MemoryID: h.MemoryID.String(), Kind: h.Kind, Label: h.Label,
					Summary: h.Summary, Content: h.Content, Score: h.Score, CreatedAt: h.CreatedAt})
			}
			return nil, out, s.done(req, err)
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "remember", Description: "Store a fact explicitly (mneme.remember). " +
		"mneme revises every write itself: after the call returns, its revise job compares the fact with the closest " +
		"ones and records ADD (a new fact), NOOP (a restatement: the existing fact is reconfirmed, the new row kept as merged), " +
		"SUPERSEDE (it replaces an older value, which is kept as superseded) or INVALIDATE (it retracts one). " +
		"The result is the memory_id with revision queued; history or inspect of that id shows the outcome once the " +
		"mneme sidecar ran the job. Pass supersedes only when you know which memory_id this replaces (applied at once)."},
		func(ctx context.Context, req *mcp.CallToolRequest, in RememberIn) (*mcp.CallToolResult, RememberOut, error) {
			out := RememberOut{Revision: "queued"}
			conv, err := client.ParseID("conversation_id", in.ConversationID)
			if err != nil {
				return nil, RememberOut{}, s.done(req, err)
			}
			o := client.RememberOptions{Label: in.Label}
			if in.Supersedes != "" {
				if o.Supersedes, err = client.ParseID("supersedes", in.Supersedes); err != nil {
					return nil, RememberOut{}, s.done(req, err)
				}
			}
			id, err := s.client(req).Remember(ctx, conv, in.Content, o)
			if err != nil {
				return nil, RememberOut{}, s.done(req, err)
			}
			out.MemoryID = id.String()
			// With supersedes, mneme.remember applied the caller's decision
			// itself and queued no revise job; without, the action is the
			// revise job's to decide (never guessed here).
			text := fmt.Sprintf("Stored as memory %s. Revision is queued: the mneme sidecar's revise job classifies it "+
				"against the closest facts (ADD, NOOP, SUPERSEDE or INVALIDATE); history or inspect of this memory_id "+
				"shows the outcome once it ran.", out.MemoryID)
			if in.Supersedes != "" {
				out.Revision, out.Action, out.Supersedes = "applied", "SUPERSEDE", in.Supersedes
				text = fmt.Sprintf("Stored as memory %s; it supersedes %s, which is kept as superseded.", out.MemoryID, in.Supersedes)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
		})
	s.addMemoryTools(srv)
}
