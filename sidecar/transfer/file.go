package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ExportFile exports to the file at path, gzipped when its name ends in .gz,
// or to stdout when path is "-". The file is written beside its target and
// renamed at the end, so a failed export never leaves a file that looks
// complete.
func ExportFile(ctx context.Context, conn *pgx.Conn, path string, stdout io.Writer, o ExportOptions) (Stats, error) {
	if path == "-" {
		return Export(ctx, conn, stdout, o)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".mneme-export-*")
	if err != nil {
		return Stats{}, fmt.Errorf("create %s: %w", path, err)
	}
	defer os.Remove(f.Name()) //nolint:errcheck // gone after the rename
	defer f.Close()
	o.Gzip = strings.HasSuffix(path, ".gz")
	st, err := Export(ctx, conn, f, o)
	if err != nil {
		return st, err
	}
	if err := f.Close(); err != nil {
		return st, fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return st, fmt.Errorf("write %s: %w", path, err)
	}
	return st, nil
}

// OpenInput opens the file to import, or stdin when name is "-".
func OpenInput(name string, stdin io.Reader) (io.ReadCloser, error) {
	if name == "-" {
		return io.NopCloser(stdin), nil
	}
	return os.Open(name)
}

// SetIDs applies mneme import's --conversations (keep or new), --seed (a
// uuid, with new only) and --from (mneme or mem0) flags.
func (o *ImportOptions) SetIDs(mode, seed, from string) error {
	switch mode {
	case "keep":
	case "new":
		o.NewIDs = true
	default:
		return fmt.Errorf("--conversations %q: use keep or new", mode)
	}
	if seed != "" {
		s, err := uuid.Parse(seed)
		if err != nil || !o.NewIDs {
			return errors.New("--seed wants a UUID, with --conversations new")
		}
		o.Seed = s
	}
	if from != "mneme" && from != "mem0" {
		return fmt.Errorf("--from %q: use mneme or mem0", from)
	}
	return nil
}
