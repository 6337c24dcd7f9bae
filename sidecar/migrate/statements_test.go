package migrate

import (
	"io/fs"
	"strings"
	"testing"

	sqlfiles "github.com/mneme-memory/mneme/sql"
)

// TestStatementsSplitsAtTopLevelSemicolons: the Citus path sends one
// statement at a time; a semicolon inside a dollar-quoted body (named or
// not) or a comment line does not end one.
func TestStatementsSplitsAtTopLevelSemicolons(t *testing.T) {
	got := statements(`-- a comment; not a statement
CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $$
BEGIN
    RETURN 1;
END
$$;
DO $x$ BEGIN PERFORM 1; END $x$;
SELECT '$1 is not a tag';
SELECT 2;
`)
	want := []string{"CREATE FUNCTION", "DO $x$", "SELECT '$1", "SELECT 2;"}
	if len(got) != len(want) {
		t.Fatalf("got %d statements, want %d: %q", len(got), len(want), got)
	}
	for i, w := range want {
		if !strings.HasPrefix(strings.TrimSpace(got[i]), w) {
			t.Errorf("statement %d = %q, want it to start with %q", i, got[i], w)
		}
	}
	if !strings.Contains(got[0], "RETURN 1;\nEND\n$$;") {
		t.Errorf("the function body was cut: %q", got[0])
	}
}

// TestStatementsKeepEverySQLFileWhole: splitting each embedded SQL file and
// joining it again loses nothing but comment and blank lines outside
// bodies, and every statement ends with a semicolon.
func TestStatementsKeepEverySQLFileWhole(t *testing.T) {
	names, err := fs.Glob(sqlfiles.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	names = append(names, "citus/distribute.sql")
	for _, name := range names {
		var body []byte
		if strings.HasPrefix(name, "citus/") {
			body, err = fs.ReadFile(sqlfiles.Citus, name)
		} else {
			body, err = fs.ReadFile(sqlfiles.FS, name)
		}
		if err != nil {
			t.Fatal(err)
		}
		stmts := statements(string(body))
		if len(stmts) == 0 {
			t.Fatalf("%s: no statements", name)
		}
		for _, s := range stmts {
			if !strings.HasSuffix(strings.TrimSpace(s), ";") {
				t.Errorf("%s: a statement does not end with a semicolon: %.200q", name, s)
			}
		}
	}
}
