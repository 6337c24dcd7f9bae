package tests

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mneme-memory/mneme/sidecar/dbtest"
	"github.com/mneme-memory/mneme/sidecar/transfer"
)

// parallelSource is transferSource's database with eight more
// conversations of six remembered facts each, linked across conversations
// both ways (a later conversation's memory superseding an earlier one's,
// and the other way round), so conversations written at once refer to each
// other's memories.
func parallelSource(t *testing.T, variant string) *dbtest.DB {
	t.Helper()
	ctx := context.Background()
	e, _ := transferSource(t, variant)
	convs := make([]uuid.UUID, 8)
	for i := range convs {
		convs[i] = uuid.New()
	}
	sort.Slice(convs, func(i, j int) bool { return convs[i].String() < convs[j].String() })
	mems := make([][]uuid.UUID, len(convs))
	for i, c := range convs {
		for j := range 6 {
			var id uuid.UUID
			require.NoError(t, e.db.Pool.QueryRow(ctx, `SELECT mneme.remember($1, $2)`, c,
				fmt.Sprintf("Fact %d of conversation %d: the %s lamp is on shelf %d.", j, i, []string{"red", "blue", "green"}[j%3], i*10+j)).Scan(&id))
			mems[i] = append(mems[i], id)
		}
	}
	for i := 1; i < len(convs); i++ {
		// backward: conversation i's first memory supersedes i-1's last;
		// forward: i-1's second confirms i's third.
		_, err := e.db.Pool.Exec(ctx, `UPDATE mneme.memories SET supersedes_id = $2 WHERE id = $1`, mems[i][0], mems[i-1][5])
		require.NoError(t, err)
		_, err = e.db.Pool.Exec(ctx, `UPDATE mneme.memories SET confirms_id = $2 WHERE id = $1`, mems[i-1][1], mems[i][2])
		require.NoError(t, err)
	}
	return e.db
}

// Importing with several jobs gives the database one job gives (compared
// through their exports), in both vector variants, with batches of the
// default size and of a few lines (many batches in flight at once).
func TestImportJobsEqualsOneJob(t *testing.T) {
	t.Parallel()
	for _, variant := range variants(t) {
		t.Run(variant, func(t *testing.T) {
			src := parallelSource(t, variant)
			for _, emb := range []bool{false, true} {
				file := exportAll(t, src.URL, transfer.ExportOptions{Embeddings: emb, MnemeVersion: "test"})
				want := withoutExportTime(t, file)
				var first transfer.Result
				for i, o := range []transfer.ImportOptions{{Jobs: 1}, {Jobs: 2}, {Jobs: 4, Batch: 2}, {Jobs: 3, Batch: 5}} {
					o.Settings = true
					dst := dbtest.New(t, dbtest.WithVector(variant))
					res, err := importFile(t, dst.URL, file, o)
					require.NoError(t, err, "jobs %d", o.Jobs)
					require.Equal(t, want, withoutExportTime(t, exportAll(t, dst.URL, transfer.ExportOptions{Embeddings: emb, MnemeVersion: "test"})),
						"jobs %d, batch %d", o.Jobs, o.Batch)
					if i == 0 {
						first = res
						require.EqualValues(t, 11, res.Conversations)
						continue
					}
					require.Equal(t, first.Stats, res.Stats, "jobs %d", o.Jobs)
					require.Zero(t, res.DroppedLinks)
					// Again: every conversation is there, skipped.
					res, err = importFile(t, dst.URL, file, o)
					require.NoError(t, err)
					require.EqualValues(t, 0, res.Conversations)
					require.EqualValues(t, 11, res.Skipped)
				}
			}
		})
	}
}

// A bad file gives the same error and leaves the same database whatever
// the jobs: a line failing validation, a memory id repeated from an earlier
// conversation (a database error, and a lock the earlier conversation would
// wait for were both written at once), a conversation id repeated. The
// conversations before the bad one are in, it and the ones after are not;
// the good file afterwards resumes.
func TestImportJobsBadFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := parallelSource(t, "array")
	good := exportAll(t, src.URL, transfer.ExportOptions{})
	want := withoutExportTime(t, good)
	lines := fileLines(good)
	var convAt []int // the conversation lines
	for i, l := range lines {
		if strings.Contains(l, `"type": "conversation"`) {
			convAt = append(convAt, i)
		}
	}
	require.Len(t, convAt, 11)
	// memoryIn is the index of the k-th memory line of conversation c.
	memoryIn := func(c, k int) int {
		for i := convAt[c]; i < len(lines); i++ {
			if strings.Contains(lines[i], `"type": "memory"`) {
				if k == 0 {
					return i
				}
				k--
			}
		}
		t.Fatalf("no memory %d in conversation %d", k, c)
		return -1
	}
	field := func(line, name string) string {
		i := strings.Index(line, `"`+name+`": "`)
		require.Positive(t, i, line)
		return line[i+len(name)+5 : i+len(name)+5+36]
	}
	replace := func(i int, f func(string) string) []byte {
		out := append([]string{}, lines...)
		out[i] = f(out[i])
		return joinLines(out)
	}
	// A conversation of remembered facts after another, not the last.
	facts := func(c int) bool { return strings.Contains(lines[convAt[c]+1], "Fact ") }
	bad, in := -1, 0
	for c := 9; c >= 2 && bad < 0; c-- {
		if facts(c) && facts(c-1) {
			bad = c
		}
	}
	require.Positive(t, bad)
	for c := range bad {
		if !strings.Contains(lines[convAt[c]], `"erased": true`) {
			in++
		}
	}
	m := memoryIn(bad, 3)
	earlier := memoryIn(bad-1, 2)
	// The repeated conversation: all of bad's lines carry bad-1's id.
	repeated := append([]string{}, lines...)
	for i := convAt[bad]; i < convAt[bad+1]; i++ {
		repeated[i] = strings.ReplaceAll(repeated[i], field(lines[convAt[bad]], "id"), field(lines[convAt[bad-1]], "id"))
	}
	cases := []struct {
		name string
		file []byte
		line int // the line the error names
		msg  string
	}{
		{"a line failing validation", replace(m, func(l string) string { return strings.Replace(l, `"status": "`, `"status": "bogus`, 1) }),
			m + 1, `status "bogus`},
		{"a memory id of an earlier conversation", replace(m, func(l string) string {
			return strings.Replace(l, field(l, "id"), field(lines[earlier], "id"), 1)
		}), m + 1, "id collision"},
		{"a repeated conversation id", joinLines(repeated), convAt[bad] + 1, "exists in the tenant but holds 0"},
	}
	count := func(db *dbtest.DB) (n int) {
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM mneme.message_queue`).Scan(&n))
		return n
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var firstErr, firstDB string
			for i, jobs := range []int{1, 2, 4} {
				for _, batch := range []int{1000, 2} {
					dst := dbtest.New(t, dbtest.WithVector("array"))
					admin := dst.As(t, "mneme_admin")
					_, err := importFile(t, admin, c.file, transfer.ImportOptions{Settings: true, Jobs: jobs, Batch: batch})
					require.Error(t, err, "jobs %d", jobs)
					require.Contains(t, err.Error(), fmt.Sprintf("line %d:", c.line), "jobs %d, batch %d", jobs, batch)
					require.Contains(t, err.Error(), c.msg)
					got := withoutExportTime(t, exportAll(t, dst.URL, transfer.ExportOptions{}))
					if i == 0 {
						if batch == 1000 {
							firstErr, firstDB = err.Error(), got
						}
						// The conversations before the bad one are in (but
						// transferSource's erased one: no row), no other.
						require.Equal(t, in, count(dst), "batch %d", batch)
					}
					if batch == 1000 {
						require.Equal(t, firstErr, err.Error(), "jobs %d", jobs)
					}
					require.Equal(t, firstDB, got, "jobs %d, batch %d", jobs, batch)
					res, err := importFile(t, admin, good, transfer.ImportOptions{Settings: true, Jobs: jobs, Batch: batch})
					require.NoError(t, err)
					require.EqualValues(t, bad, res.Skipped)
					require.Equal(t, want, withoutExportTime(t, exportAll(t, dst.URL, transfer.ExportOptions{})))
				}
			}
		})
	}
}
