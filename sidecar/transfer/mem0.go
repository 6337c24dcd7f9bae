package transfer

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Mem0Options says how to take in a mem0 export.
type Mem0Options struct {
	Tenant string
	// By chooses the conversation of a memory: user (one per user_id, the
	// default), agent (agent_id) or run (run_id).
	By       string
	Batch    int // memories per transaction (default 500)
	Progress *Progress
}

// Mem0Result is what a mem0 import did.
type Mem0Result struct {
	Memories      int64 // remembered
	Skipped       int64 // imported before (same mem0 id in the same conversation)
	Erased        int64 // skipped: erased since an earlier import (the tombstone keeps the mem0 id)
	Conversations map[string]uuid.UUID
}

// mem0Memory is one memory of mem0's get_all output (docs/export.md cites
// the shape): the fields mneme uses; the whole object is kept as the
// memory's provenance.
type mem0Memory struct {
	ID        string          `json:"id"`
	Memory    string          `json:"memory"`
	CreatedAt *string         `json:"created_at"`
	UpdatedAt *string         `json:"updated_at"`
	UserID    *string         `json:"user_id"`
	AgentID   *string         `json:"agent_id"`
	RunID     *string         `json:"run_id"`
	Metadata  json.RawMessage `json:"metadata"`
}

// mem0Namespace derived the conversation of a mem0 scope before the
// tenant's key did (legacyMem0Conversation).
var mem0Namespace = uuid.MustParse("6d656d30-0000-5000-8000-6d6e656d6500")

// legacyMem0Conversation is the id earlier versions gave a mem0 user
// (agent, run), the same in every tenant: another tenant could take it
// first or probe it. A tenant that holds one keeps using it.
func legacyMem0Conversation(scope string) uuid.UUID {
	return uuid.NewSHA1(mem0Namespace, []byte(scope))
}

// mem0Conversation is the conversation a mem0 scope ("user:<id>") maps to
// in the transaction's tenant: mneme.named_conversation('mem0:'+scope),
// derived with the tenant's own key, so no other tenant can compute it
// (docs/export.md); the legacy id when the tenant holds that conversation
// already (imported before).
func mem0Conversation(ctx context.Context, tx pgx.Tx, scope string) (uuid.UUID, error) {
	legacy := legacyMem0Conversation(scope)
	var held bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM mneme.message_queue WHERE id = $1)`, legacy).Scan(&held); err != nil {
		return uuid.Nil, fmt.Errorf("mem0 conversation of %s: %w", scope, err)
	}
	if held {
		return legacy, nil
	}
	var id uuid.UUID
	if err := tx.QueryRow(ctx, `SELECT mneme.named_conversation($1)`, "mem0:"+scope).Scan(&id); err != nil {
		return uuid.Nil, fmt.Errorf("mem0 conversation of %s: %w", scope, err)
	}
	return id, nil
}

// ImportMem0 reads mem0's exported memories (a JSON list of memory
// objects, or get_all's {"results": [...]}) from r and remembers each
// (mneme.import_fact): one conversation per user (agent, run), the
// original time kept, the mem0 object as provenance; the revise jobs then
// handle duplicates and contradictions as for any write. The file is read
// and every memory checked before anything is written (a bad one stops
// the import, naming it); then they are written in transactions of Batch.
// A memory imported before is skipped, so a repeated or resumed import
// adds nothing twice.
func ImportMem0(ctx context.Context, conn *pgx.Conn, r io.Reader, o Mem0Options) (Mem0Result, error) {
	res := Mem0Result{Conversations: map[string]uuid.UUID{}}
	if o.By == "" {
		o.By = "user"
	}
	if o.By != "user" && o.By != "agent" && o.By != "run" {
		return res, fmt.Errorf("mem0: by %q: use user, agent or run", o.By)
	}
	if o.Batch <= 0 {
		o.Batch = 500
	}
	// mem0's export is one JSON document, so its memories are held (they
	// are small: text and a few fields each).
	var all []mem0Item
	err := decodeMem0(r, func(i int, m mem0Memory, raw json.RawMessage) error {
		it, err := m.item(i, raw, o.By)
		if err != nil {
			return err
		}
		all = append(all, it)
		return nil
	})
	if err != nil {
		return res, err
	}
	if o.Tenant != "" {
		if _, err := conn.Exec(ctx, `SELECT mneme.create_tenant($1) WHERE NOT EXISTS (SELECT 1 FROM mneme.tenants WHERE id = $1)`, o.Tenant); err != nil {
			return res, fmt.Errorf("tenant %s: %w", o.Tenant, err)
		}
	}
	for start := 0; start < len(all); start += o.Batch {
		end := min(start+o.Batch, len(all))
		if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if o.Tenant != "" {
				if _, err := tx.Exec(ctx, `SELECT mneme.set_tenant($1)`, o.Tenant); err != nil {
					return fmt.Errorf("set tenant %s: %w", o.Tenant, err)
				}
			}
			for _, it := range all[start:end] {
				conv, ok := res.Conversations[it.scope]
				if !ok {
					var err error
					if conv, err = mem0Conversation(ctx, tx, it.scope); err != nil {
						return err
					}
				}
				var id *uuid.UUID
				if err := tx.QueryRow(ctx, `SELECT mneme.import_fact($1, $2, $3, $4::jsonb)`, conv, it.content, it.at, string(it.origin)).Scan(&id); err != nil {
					return fmt.Errorf("mem0 memory %d (id %s): %w", it.index, it.id, err)
				}
				if id == nil {
					var erased bool
					if err := tx.QueryRow(ctx, `SELECT mneme.import_source_erased($1, $2)`, conv, "mem0:"+it.id).Scan(&erased); err != nil {
						return fmt.Errorf("mem0 memory %d (id %s): %w", it.index, it.id, err)
					}
					if erased {
						res.Erased++
					} else {
						res.Skipped++
					}
				} else {
					res.Memories++
				}
				res.Conversations[it.scope] = conv
			}
			return nil
		}); err != nil {
			return res, err
		}
		o.Progress.Set(res.Memories, int64(end))
	}
	o.Progress.Done(res.Memories, int64(len(all)))
	return res, nil
}

type mem0Item struct {
	index   int
	id      string
	scope   string
	content string
	at      *time.Time
	origin  json.RawMessage
}

// item checks one mem0 memory and makes it an import_fact call's arguments.
func (m mem0Memory) item(i int, raw json.RawMessage, by string) (mem0Item, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: mem0 memory %d (id %q): "+format, append([]any{ErrFormat, i, m.ID}, args...)...)
	}
	if strings.TrimSpace(m.ID) == "" {
		return mem0Item{}, bad(`no "id"`)
	}
	if strings.TrimSpace(m.Memory) == "" {
		return mem0Item{}, bad(`no "memory" text`)
	}
	if len(m.Metadata) > 0 && string(m.Metadata) != "null" && m.Metadata[0] != '{' {
		return mem0Item{}, bad(`"metadata" must be an object or null`)
	}
	it := mem0Item{index: i, id: m.ID, content: m.Memory}
	for _, t := range []struct {
		name string
		v    *string
	}{{"created_at", m.CreatedAt}, {"updated_at", m.UpdatedAt}} {
		if t.v == nil || *t.v == "" {
			continue
		}
		at, err := parseMem0Time(*t.v)
		if err != nil {
			return mem0Item{}, bad("%s %q is not a time", t.name, *t.v)
		}
		if t.name == "created_at" {
			it.at = &at
		}
	}
	var scope *string
	switch by {
	case "user":
		scope = m.UserID
	case "agent":
		scope = m.AgentID
	case "run":
		scope = m.RunID
	}
	it.scope = by + ":"
	if scope != nil {
		it.scope += *scope
	}
	// The whole mem0 object but its text is the provenance.
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return mem0Item{}, bad("%v", err)
	}
	delete(obj, "memory")
	origin, err := json.Marshal(map[string]any{"mem0": obj})
	if err != nil {
		return mem0Item{}, err
	}
	it.origin = origin
	return it, nil
}

// parseMem0Time reads the times mem0 writes: ISO 8601 from Python's
// isoformat, with or without a zone (no zone: UTC).
func parseMem0Time(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00",
		"2006-01-02 15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			if t.Year() < 1 || t.Year() > 9999 {
				return time.Time{}, errors.New("out of range")
			}
			return t, nil
		}
	}
	return time.Time{}, errors.New("not a time")
}

// decodeMem0 calls fn for each memory of a JSON list, or of the list under
// "results" (get_all's output), streaming.
func decodeMem0(r io.Reader, fn func(i int, m mem0Memory, raw json.RawMessage) error) error {
	d := json.NewDecoder(bufio.NewReaderSize(r, 1<<20))
	tok, err := d.Token()
	if err != nil {
		return fmt.Errorf("%w: mem0: not JSON: %v", ErrFormat, err)
	}
	switch tok {
	case json.Delim('['):
	case json.Delim('{'):
		// {"results": [...], ...}: find the list.
		for {
			key, err := d.Token()
			if err != nil {
				return fmt.Errorf("%w: mem0: %v", ErrFormat, err)
			}
			if key == json.Delim('}') {
				return fmt.Errorf(`%w: mem0: an object without "results"`, ErrFormat)
			}
			if key == "results" {
				t, err := d.Token()
				if err != nil || t != json.Delim('[') {
					return fmt.Errorf(`%w: mem0: "results" is not a list`, ErrFormat)
				}
				break
			}
			var skip json.RawMessage
			if err := d.Decode(&skip); err != nil {
				return fmt.Errorf("%w: mem0: %v", ErrFormat, err)
			}
		}
	default:
		return fmt.Errorf(`%w: mem0: want a list of memories or {"results": [...]}`, ErrFormat)
	}
	for i := 0; d.More(); i++ {
		var raw json.RawMessage
		if err := d.Decode(&raw); err != nil {
			return fmt.Errorf("%w: mem0 memory %d: %v", ErrFormat, i, err)
		}
		var m mem0Memory
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("%w: mem0 memory %d: %v", ErrFormat, i, err)
		}
		if err := fn(i, m, raw); err != nil {
			return err
		}
	}
	if _, err := d.Token(); err != nil {
		return fmt.Errorf("%w: mem0: the list does not end (truncated?): %v", ErrFormat, err)
	}
	return nil
}
