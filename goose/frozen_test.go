package migrations

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

// TestReleasedMigrationsUnchanged: every migration frozen.sha256 lists is
// still there, byte for byte as released. New, unlisted files are allowed
// (frozen.sha256 says how to list one once released).
func TestReleasedMigrationsUnchanged(t *testing.T) {
	list, err := os.ReadFile("frozen.sha256")
	require.NoError(t, err)
	require.NoError(t, checkFrozen(os.DirFS("."), string(list)))
}

// The check fails on a changed file, a missing one and a malformed list,
// and passes on an unlisted new file.
func TestFrozenCheckCanFail(t *testing.T) {
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	fsys := fstest.MapFS{
		"00001_a.sql": {Data: []byte("CREATE TABLE a ();\n")},
		"00002_b.sql": {Data: []byte("CREATE TABLE b ();\n")},
	}
	list := "# comment\n" + sum("CREATE TABLE a ();\n") + "  00001_a.sql\n"
	require.NoError(t, checkFrozen(fsys, list), "00002 is not released yet")

	changed := list + sum("CREATE TABLE b (id int);\n") + "  00002_b.sql\n"
	err := checkFrozen(fsys, changed)
	require.ErrorContains(t, err, "goose/00002_b.sql changed after its release")

	missing := list + sum("x") + "  00003_c.sql\n"
	require.ErrorContains(t, checkFrozen(fsys, missing), "goose/00003_c.sql is listed as released but missing")

	require.ErrorContains(t, checkFrozen(fsys, list+"not a line\n"), "frozen.sha256 line 3")
}

var frozenLine = regexp.MustCompile(`^([0-9a-f]{64}) [ *]([0-9]{5}_[a-z0-9_]+\.sql)$`)

// checkFrozen checks the files of fsys against list (sha256sum's format;
// # starts a comment).
func checkFrozen(fsys fs.FS, list string) error {
	var errs []error
	sc := bufio.NewScanner(strings.NewReader(list))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := frozenLine.FindStringSubmatch(line)
		if m == nil {
			errs = append(errs, fmt.Errorf("frozen.sha256 line %d: want \"<sha256>  <NNNNN_name.sql>\" (sha256sum's output), got %q", n, line))
			continue
		}
		b, err := fs.ReadFile(fsys, m[2])
		if errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("goose/%s is listed as released but missing: a released migration is never removed", m[2]))
			continue
		}
		if err != nil {
			return err
		}
		if h := sha256.Sum256(b); hex.EncodeToString(h[:]) != m[1] {
			errs = append(errs, fmt.Errorf("goose/%s changed after its release (frozen.sha256 line %d): restore it "+
				"(git checkout main -- goose/%s) and put the change in a new migration", m[2], n, m[2]))
		}
	}
	return errors.Join(errs...)
}
