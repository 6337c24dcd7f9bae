package transfer

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"sort"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ExportOptions says what to export.
type ExportOptions struct {
	Tenant        string      // "" = the session's (default, or the login's)
	Conversations []uuid.UUID // none = every conversation of the tenant
	Embeddings    bool        // write the embeddings
	Model         string      // the external embedder's model, for the header ("" with the built-in one)
	MnemeVersion  string      // the exporting binary's version, for the header
	Gzip          bool        // gzip the output
	Progress      *Progress   // nil = silent
}

// Stats counts what an export wrote or an import read.
type Stats struct {
	Lines         int64
	Conversations int64
	Messages      int64
	Memories      int64
	Reviews       int64
	Events        int64
	Skipped       int64 // import: conversations already there
}

// conversationPage is how many conversation ids one query fetches.
const conversationPage = 1000

// Export writes the tenant's memory to w in the export format: one
// REPEATABLE READ, read-only transaction (a consistent snapshot), rows
// streamed from mneme.export_lines one conversation at a time, so memory
// stays bounded whatever the tenant's size.
func Export(ctx context.Context, conn *pgx.Conn, w io.Writer, o ExportOptions) (Stats, error) {
	var st Stats
	out := w
	var gz *gzip.Writer
	if o.Gzip {
		gz = gzip.NewWriter(w)
		out = gz
	}
	bw := bufio.NewWriterSize(out, 1<<20)
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return st, fmt.Errorf("begin export: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read only
	if o.Tenant != "" {
		if _, err := tx.Exec(ctx, `SELECT mneme.set_tenant($1)`, o.Tenant); err != nil {
			return st, fmt.Errorf("set tenant %s: %w", o.Tenant, err)
		}
	}
	var model *string
	if o.Model != "" {
		model = &o.Model
	}
	write := func(line []byte) error {
		st.Lines++
		if st.Lines%1024 == 0 {
			o.Progress.Set(st.Memories, st.Lines)
		}
		if _, err := bw.Write(line); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		return bw.WriteByte('\n')
	}
	var header []byte
	if err := tx.QueryRow(ctx, `SELECT mneme.export_header($1, $2, $3)::text`, o.Embeddings, model, o.MnemeVersion).Scan(&header); err != nil {
		return st, fmt.Errorf("export header: %w", err)
	}
	if err := write(header); err != nil {
		return st, err
	}
	st.Lines = 0 // the end line counts the lines between header and end
	if err := streamLines(ctx, tx, `SELECT s::text FROM mneme.export_settings() s`, nil, write, nil); err != nil {
		return st, fmt.Errorf("export settings: %w", err)
	}
	one := func(id uuid.UUID) error {
		st.Conversations++
		err := streamLines(ctx, tx, `SELECT l::text FROM mneme.export_lines($1, $2) l`, []any{id, o.Embeddings}, write, &st)
		if err != nil {
			return fmt.Errorf("export conversation %s: %w", id, err)
		}
		return nil
	}
	if len(o.Conversations) > 0 {
		ids := append([]uuid.UUID(nil), o.Conversations...)
		sort.Slice(ids, func(i, j int) bool { return bytes.Compare(ids[i][:], ids[j][:]) < 0 })
		for i, id := range ids {
			if i > 0 && id == ids[i-1] {
				continue
			}
			if err := one(id); err != nil {
				return st, err
			}
		}
	} else {
		var after *uuid.UUID
		for {
			rows, err := tx.Query(ctx, `SELECT mneme.export_conversations($1, $2)`, after, conversationPage)
			if err != nil {
				return st, fmt.Errorf("list conversations: %w", err)
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
			if err != nil {
				return st, fmt.Errorf("list conversations: %w", err)
			}
			for _, id := range ids {
				if err := one(id); err != nil {
					return st, err
				}
			}
			if len(ids) < conversationPage {
				break
			}
			last := ids[len(ids)-1]
			after = &last
		}
	}
	lines := st.Lines
	if err := write([]byte(fmt.Sprintf(`{"type": "end", "lines": %d, "conversations": %d}`, lines, st.Conversations))); err != nil {
		return st, err
	}
	if err := bw.Flush(); err != nil {
		return st, fmt.Errorf("write: %w", err)
	}
	if gz != nil {
		if err := gz.Close(); err != nil {
			return st, fmt.Errorf("write: %w", err)
		}
	}
	o.Progress.Done(st.Memories, st.Lines)
	return st, nil
}

// streamLines writes the text rows of a query, counting kinds into st.
func streamLines(ctx context.Context, tx pgx.Tx, q string, args []any, write func([]byte) error, st *Stats) error {
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		// RawValues: the text of the row, no copy (it is written at once).
		line := rows.RawValues()[0]
		if st != nil {
			switch kindOf(line) {
			case kindMessage:
				st.Messages++
			case kindMemory:
				st.Memories++
			case kindReview:
				st.Reviews++
			case kindEvent:
				st.Events++
			}
		}
		if err := write(line); err != nil {
			return err
		}
	}
	return rows.Err()
}

// kindOf finds the "type" of a line jsonb wrote: the key appears as
// `"type": "...` once (inside a string a quote is escaped).
func kindOf(line []byte) string {
	const key = `"type": "`
	i := bytes.Index(line, []byte(key))
	if i < 0 {
		return ""
	}
	rest := line[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return string(rest[:j])
}
