// Package version owns mneme's versions: the binary's (semantic, set here;
// a development build appends its commit), the SQL API's that the binary
// speaks (mneme.version() of the SQL layer it embeds), and the check that a
// database's SQL API is one the binary speaks (docs/migrations.md).
package version

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	sqlfiles "github.com/mneme-memory/mneme/sql"
)

// Release is the binary's semantic version: bumped when a release is cut.
const Release = "0.10.0"

// Commit is set by the Makefile (-ldflags "-X ...version.Commit=...") to
// the commit of a development build; a release build leaves it empty.
var Commit = ""

// Binary is the binary's version: Release, plus "+<commit>" for a
// development build (semantic versioning's build metadata).
func Binary() string {
	if Commit == "" {
		return Release
	}
	return Release + "+" + Commit
}

// sqlAPIRe finds the version mneme.version() returns in sql/000-core.sql.
var sqlAPIRe = regexp.MustCompile(`(?s)FUNCTION mneme\.version\(\).*?AS \$\$ SELECT '(\d+\.\d+\.\d+)'::text \$\$`)

// SQLAPI is the SQL API's version this binary speaks and migrates to: the
// one mneme.version() returns in the SQL layer it embeds, read from there
// so that it is written in one place.
func SQLAPI() string {
	body, err := fs.ReadFile(sqlfiles.FS, "000-core.sql")
	if err != nil {
		panic(fmt.Sprintf("version: the embedded sql/000-core.sql: %v", err))
	}
	m := sqlAPIRe.FindSubmatch(body)
	if m == nil {
		panic("version: sql/000-core.sql defines no mneme.version() of the form SELECT 'X.Y.Z'::text")
	}
	return string(m[1])
}

// ErrIncompatible is the error of Check when the database's SQL API is not
// one this binary speaks.
var ErrIncompatible = errors.New("incompatible SQL API")

// Major is the major version of a semantic version ("1.2.3" -> 1).
func Major(v string) (int, error) {
	s, _, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a semantic version", v)
	}
	return n, nil
}

// Compatible says whether a binary that speaks SQL API speaks talks to a
// database whose SQL API is db: the same major. A newer minor in the
// database only adds functions and arguments, which an older binary does
// not call; an older minor lacks nothing a binary of the same major needs,
// because a binary's own calls only change with a major.
func Compatible(speaks, db string) error {
	sm, err := Major(speaks)
	if err != nil {
		return err
	}
	dm, err := Major(db)
	if err != nil {
		return fmt.Errorf("%w: the database's mneme.version() is %q, not a semantic version", ErrIncompatible, db)
	}
	switch {
	case dm < sm:
		return fmt.Errorf("%w: the database's SQL API is %s, this mneme %s speaks %s: "+
			"migrate the database first (DATABASE_URL=... mneme migrate with this binary), then start this sidecar (docs/migrations.md)",
			ErrIncompatible, db, Binary(), speaks)
	case dm > sm:
		return fmt.Errorf("%w: the database's SQL API is %s, this mneme %s speaks %s: "+
			"the database was migrated by a newer mneme; run that release's sidecar (docs/migrations.md)",
			ErrIncompatible, db, Binary(), speaks)
	}
	return nil
}

// Querier is what Database needs of a connection or pool.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Database is the database's SQL API version, mneme.version(). A database
// migrated before mneme.version() existed has none: ErrIncompatible with
// what to run.
func Database(ctx context.Context, db Querier) (string, error) {
	var v string
	err := db.QueryRow(ctx, `SELECT mneme.version()`).Scan(&v)
	var pg *pgconn.PgError
	if errors.As(err, &pg) && (pg.Code == "42883" || pg.Code == "3F000") {
		return "", fmt.Errorf("%w: the database has no mneme.version() (not migrated, or migrated by a mneme older than 0.10.0), "+
			"this mneme %s speaks SQL API %s: migrate it first (DATABASE_URL=... mneme migrate with this binary), then start this sidecar (docs/migrations.md)",
			ErrIncompatible, Binary(), SQLAPI())
	}
	if err != nil {
		return "", fmt.Errorf("read mneme.version(): %w", err)
	}
	return v, nil
}

// Check reads the database's SQL API version and refuses one this binary
// does not speak.
func Check(ctx context.Context, db Querier) (string, error) {
	v, err := Database(ctx, db)
	if err != nil {
		return "", err
	}
	return v, Compatible(SQLAPI(), v)
}
