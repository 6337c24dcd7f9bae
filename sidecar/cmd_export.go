package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mneme-memory/mneme/sidecar/cli"
	"github.com/mneme-memory/mneme/sidecar/config"
	"github.com/mneme-memory/mneme/sidecar/embed"
	"github.com/mneme-memory/mneme/sidecar/transfer"
	"github.com/mneme-memory/mneme/sidecar/version"
)

func cmdExport(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flags("export")
	o := transfer.ExportOptions{MnemeVersion: version.Binary()}
	var convs cli.UUIDList
	fs.StringVar(&o.Tenant, "tenant", "", "the tenant to export (default: the session's)")
	fs.Var(&convs, "conversation", "export only this conversation (repeatable)")
	out := fs.String("o", "-", "output file; a name ending in .gz is gzipped; - = stdout")
	fs.BoolVar(&o.Embeddings, "embeddings", false, "include the embeddings")
	quiet := fs.Bool("quiet", false, "no progress on stderr")
	if err := cli.Parse(fs, args, false); err != nil {
		return err
	}
	o.Conversations = convs
	if err := useDemoCluster(ctx, log); err != nil {
		return err
	}
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
	o.Progress = transfer.NewProgress(os.Stderr, "exported", *quiet)
	st, err := transfer.ExportFile(ctx, conn, *out, os.Stdout, o)
	if err != nil {
		return err
	}
	log.Info("exported", "conversations", st.Conversations, "messages", st.Messages, "memories", st.Memories,
		"reviews", st.Reviews, "events", st.Events, "file", *out)
	return nil
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
	fs.IntVar(&o.Jobs, "jobs", runtime.NumCPU(), "conversations written at once, each on its own connection (at least 1; they still commit in the file's order)")
	fs.BoolVar(&o.DeferIndex, "defer-index", false, "pgvector: drop the HNSW index and build it after the import (a restore; needs the table's owner, and searches go without the index meanwhile)")
	quiet := fs.Bool("quiet", false, "no progress on stderr")
	if err := cli.Parse(fs, args, true); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: import: want one FILE (- = stdin) (see mneme import --help)", cli.ErrUsage)
	}
	if o.Jobs < 1 {
		return fmt.Errorf("%w: import: --jobs %d: want at least 1", cli.ErrUsage, o.Jobs)
	}
	if err := o.SetIDs(*ids, *seed, *from); err != nil {
		return fmt.Errorf("%w: import: %v", cli.ErrUsage, err)
	}
	o.Settings = !*noSettings
	if err := useDemoCluster(ctx, log); err != nil {
		return err
	}
	cfg, err := config.Load(true)
	if err != nil {
		return err
	}
	r, err := transfer.OpenInput(fs.Arg(0), os.Stdin)
	if err != nil {
		return err
	}
	defer r.Close()
	conn, err := pgx.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	progress := transfer.NewProgress(os.Stderr, "imported", *quiet)
	if *from == "mem0" {
		res, err := transfer.ImportMem0(ctx, conn, r, transfer.Mem0Options{Tenant: o.Tenant, By: *by, Progress: progress})
		if err != nil {
			return importRole(err)
		}
		log.Info("imported from mem0", "memories", res.Memories, "skipped", res.Skipped, "erased_skipped", res.Erased,
			"conversations", len(res.Conversations))
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
		return importRole(err)
	}
	// The file's counts are of what it holds; a conversation imported before
	// (a resumed import) is read and left as it is, not written again; what
	// the tenant erased is left out (erase is final).
	log.Info("imported", "conversations_written", res.Conversations, "conversations_already_there", res.Skipped,
		"file_messages", res.Messages, "file_memories", res.Memories, "file_reviews", res.Reviews, "file_events", res.Events,
		"embeddings_kept", res.KeptEmbedding, "embedded", res.Embedded, "dropped_links", res.DroppedLinks,
		"erased_conversations_left_out", res.ErasedConversations, "erased_rows_left_out", res.ErasedRows)
	return nil
}

// importRole adds to a privilege error the role an import needs: it
// writes rows as they were (ids, times, FSRS state), which only the
// admins' functions may.
func importRole(err error) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) && pg.Code == "42501" && strings.Contains(pg.Message, "permission denied") {
		return fmt.Errorf("%w\nmneme import needs a login that is a member of mneme_admin (an admin: GRANT mneme_admin TO ...; docs/export.md); "+
			"the login of DATABASE_URL is not", err)
	}
	return err
}
