package tests

import (
	"bufio"
	"compress/gzip"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/cluster"
	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/migrate"
)

// upgradeFrom is the previous release: tests/testdata/upgrade holds its
// database with data, one dump per vector variant, made by
// scripts/upgrade-snapshot.sh.
const upgradeFrom = "6e08fac"

// TestUpgradeFromPreviousRelease: the previous release's database with its
// data (docs/examples.sql run against it), migrated by this mneme, has the
// schema of a fresh install (tables, columns, indexes, views, functions,
// goose versions, setting keys) and keeps its data: the same messages,
// memories and events, and search finds what it found.
func TestUpgradeFromPreviousRelease(t *testing.T) {
	t.Parallel()
	if dbtest.OnCitus() {
		t.Skip("the snapshots are of one server")
	}
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			_, fresh := dbtest.NewEmpty(t)
			_, err := migrate.Run(ctx, fresh, migrate.Options{Vector: variant})
			require.NoError(t, err)

			_, url := dbtest.NewEmpty(t)
			restoreSnapshot(t, filepath.Join("testdata", "upgrade", upgradeFrom+"-"+variant+".sql.gz"), url)
			before := upgradeData(t, url)
			require.Contains(t, before, "Alice moved to Berlin", "the snapshot holds the examples' data")
			res, err := migrate.Run(ctx, url, migrate.Options{Vector: variant})
			require.NoError(t, err)
			require.Equal(t, variant, res.Variant)

			onlyFresh, onlyUpgraded := lineDiff(upgradeSchema(t, fresh), upgradeSchema(t, url))
			require.Empty(t, onlyFresh, "a fresh install has these, the database upgraded from %s not", upgradeFrom)
			require.Empty(t, onlyUpgraded, "the database upgraded from %s has these, a fresh install not", upgradeFrom)
			require.Equal(t, before, upgradeData(t, url), "the data is kept")
		})
	}
}

// restoreSnapshot feeds a gzipped pg_dump to psql (without the \restrict
// lines of newer pg_dumps, which older psqls do not know).
func restoreSnapshot(t *testing.T, path, url string) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err, "scripts/upgrade-snapshot.sh %s writes it", upgradeFrom)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	var dump strings.Builder
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if line := sc.Text(); !strings.HasPrefix(line, `\restrict `) && !strings.HasPrefix(line, `\unrestrict `) {
			dump.WriteString(line + "\n")
		}
	}
	require.NoError(t, sc.Err())
	bin, err := cluster.FindBinDir()
	require.NoError(t, err)
	cmd := exec.Command(filepath.Join(bin, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", "-", url)
	cmd.Stdin = strings.NewReader(dump.String())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "restore %s: %s", path, out)
}

// upgradeSchema is schemaFingerprint with the settings' keys but not their
// values: the data set some (docs/examples.sql's set_setting).
func upgradeSchema(t *testing.T, url string) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(schemaFingerprint(t, url), "\n") {
		if strings.HasPrefix(line, "setting ") {
			line, _, _ = strings.Cut(line, "=")
		}
		out = append(out, line)
	}
	return out
}

// lineDiff is the lines only a has and those only b has.
func lineDiff(a, b []string) (onlyA, onlyB []string) {
	inA, inB := map[string]bool{}, map[string]bool{}
	for _, l := range a {
		inA[l] = true
	}
	for _, l := range b {
		inB[l] = true
		if !inA[l] {
			onlyB = append(onlyB, l)
		}
	}
	for _, l := range a {
		if !inB[l] {
			onlyA = append(onlyA, l)
		}
	}
	return onlyA, onlyB
}

// upgradeData is what the data says: the messages, the memories (their
// status and content: a migration may move FSRS state, as 00042 did) and
// the events of every conversation, and what a search of the examples'
// conversation finds.
func upgradeData(t *testing.T, url string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var s string
	require.NoError(t, conn.QueryRow(ctx, `SELECT concat_ws(E'\n',
		(SELECT string_agg(format('message %s %s %s %s', conversation_id, id, role, content), E'\n' ORDER BY conversation_id, id) FROM mneme.messages),
		(SELECT string_agg(format('memory %s %s %s', id, status, coalesce(content, '')), E'\n' ORDER BY id) FROM mneme.memories),
		(SELECT string_agg(format('event %s %s %s', memory_id, event, reason), E'\n' ORDER BY id) FROM mneme.memory_events),
		(SELECT string_agg(content, E'\n' ORDER BY score DESC, memory_id)
		   FROM mneme.search('7f1c2f9e-0000-4000-8000-000000000001', 'where does Alice live', 5, at => '2030-01-01')))`).Scan(&s))
	return s
}
