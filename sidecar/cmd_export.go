package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/transfer"
)

// uuidList is a repeatable --conversation flag.
type uuidList []uuid.UUID

func (l *uuidList) String() string { return fmt.Sprint(*l) }
func (l *uuidList) Set(s string) error {
	id, err := uuid.Parse(s)
	if err != nil {
		return fmt.Errorf("not a conversation id: %q", s)
	}
	*l = append(*l, id)
	return nil
}

func cmdExport(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("export")
	o := transfer.ExportOptions{MnemeVersion: version}
	var convs uuidList
	fs.StringVar(&o.Tenant, "tenant", "", "the tenant to export (default: the session's)")
	fs.Var(&convs, "conversation", "export only this conversation (repeatable)")
	out := fs.String("o", "-", "output file; a name ending in .gz is gzipped; - = stdout")
	fs.BoolVar(&o.Embeddings, "embeddings", false, "include the embeddings")
	quiet := fs.Bool("quiet", false, "no progress on stderr")
	if err := cli.Parse(fs, args, false); err != nil {
		return err
	}
	o.Conversations = convs
	cfg, err := config.Load(true)
	if err != nil {
		return err
	}
	if cfg.Embed.Configured() {
		o.Model = cfg.Embed.Model
	}
	conn, err := pgx.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	var w io.Writer = os.Stdout
	var f *os.File
	if *out != "-" {
		// Written beside the target and renamed at the end, so a failed
		// export never leaves a file that looks complete.
		if f, err = os.CreateTemp(dirOf(*out), ".mneme-export-*"); err != nil {
			return fmt.Errorf("create %s: %w", *out, err)
		}
		defer os.Remove(f.Name()) //nolint:errcheck // gone after the rename
		defer f.Close()
		w = f
		o.Gzip = strings.HasSuffix(*out, ".gz")
	}
	o.Progress = transfer.NewProgress(os.Stderr, "exported", *quiet)
	st, err := transfer.Export(ctx, conn, w, o)
	if err != nil {
		return err
	}
	if f != nil {
		if err := f.Close(); err != nil {
			return fmt.Errorf("write %s: %w", *out, err)
		}
		if err := os.Rename(f.Name(), *out); err != nil {
			return fmt.Errorf("write %s: %w", *out, err)
		}
	}
	log.Info("exported", "conversations", st.Conversations, "messages", st.Messages, "memories", st.Memories,
		"reviews", st.Reviews, "events", st.Events, "file", *out)
	return nil
}

func dirOf(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[:i+1]
	}
	return "."
}

func cmdImport(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("import")
	var o transfer.ImportOptions
	fs.StringVar(&o.Tenant, "tenant", "", "the tenant to import into, created when missing (default: the session's)")
	ids := fs.String("conversations", "keep", "keep: the file's ids; new: new ids (derived from --seed), so a file can be imported twice")
	seed := fs.String("seed", "", "with --conversations new: the seed of the new ids (default random, logged; give it again to resume)")
	from := fs.String("from", "mneme", "the file's format: mneme (mneme export) or mem0 (mem0's exported memories)")
	by := fs.String("mem0-by", "user", "--from mem0: one conversation per user (user_id), agent (agent_id) or run (run_id)")
	noSettings := fs.Bool("no-settings", false, "do not apply the file's settings")
	fs.IntVar(&o.Batch, "batch", 1000, "lines per statement")
	fs.BoolVar(&o.DeferIndex, "defer-index", false, "pgvector: drop the HNSW index and build it after the import (a restore; needs the table's owner, and searches go without the index meanwhile)")
	quiet := fs.Bool("quiet", false, "no progress on stderr")
	if err := cli.Parse(fs, args, true); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: import: want one FILE (- = stdin) (see mneme import --help)", cli.ErrUsage)
	}
	switch *ids {
	case "keep":
	case "new":
		o.NewIDs = true
	default:
		return fmt.Errorf("%w: import: --conversations %q: use keep or new", cli.ErrUsage, *ids)
	}
	if *seed != "" {
		s, err := uuid.Parse(*seed)
		if err != nil || !o.NewIDs {
			return fmt.Errorf("%w: import: --seed wants a UUID, with --conversations new", cli.ErrUsage)
		}
		o.Seed = s
	}
	if *from != "mneme" && *from != "mem0" {
		return fmt.Errorf("%w: import: --from %q: use mneme or mem0", cli.ErrUsage, *from)
	}
	o.Settings = !*noSettings
	cfg, err := config.Load(true)
	if err != nil {
		return err
	}
	var r io.Reader = os.Stdin
	if name := fs.Arg(0); name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	conn, err := pgx.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	progress := transfer.NewProgress(os.Stderr, "imported", *quiet)
	if *from == "mem0" {
		res, err := transfer.ImportMem0(ctx, conn, r, transfer.Mem0Options{Tenant: o.Tenant, By: *by, Progress: progress})
		if err != nil {
			return err
		}
		log.Info("imported from mem0", "memories", res.Memories, "skipped", res.Skipped, "conversations", len(res.Conversations))
		return nil
	}
	if cfg.Embed.Configured() {
		o.Embedder, o.Model = embed.New(cfg.Embed, cfg.EmbedDim), cfg.Embed.Model
	}
	o.Progress, o.Log = progress, log
	if o.NewIDs {
		if o.Seed == uuid.Nil {
			o.Seed = uuid.New()
		}
		log.Info("new ids", "seed", o.Seed.String())
	}
	res, err := transfer.Import(ctx, conn, r, o)
	if err != nil {
		return err
	}
	log.Info("imported", "conversations", res.Conversations, "skipped", res.Skipped, "messages", res.Messages,
		"memories", res.Memories, "reviews", res.Reviews, "events", res.Events, "embeddings_kept", res.KeptEmbedding,
		"embedded", res.Embedded, "dropped_links", res.DroppedLinks)
	return nil
}
