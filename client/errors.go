package client

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
)

// Error is a mneme (or PostgreSQL) error of one call: its SQLSTATE
// (22004 a NULL, 22023 a bad value, 42501 not allowed, P0002 no such
// memory: docs/sql-api.md, "Errors"), message and HINT. Unwrap gives the
// *pgconn.PgError when the server raised it.
type Error struct {
	Op       string // the mneme function, e.g. "context"
	SQLState string
	Message  string
	Hint     string
	Detail   string
	Err      error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s: %s (SQLSTATE %s)", e.Op, e.Message, e.SQLState)
	if e.Hint != "" {
		s += "; hint: " + e.Hint
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// wrap turns a PostgreSQL error into an *Error; other errors (the
// connection's, the context's) are wrapped with the operation.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var me *Error
	if errors.As(err, &me) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return &Error{Op: op, SQLState: pgErr.Code, Message: pgErr.Message, Hint: pgErr.Hint, Detail: pgErr.Detail, Err: err}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// SQLState is err's SQLSTATE, or "" when it carries none.
func SQLState(err error) string {
	var me *Error
	if errors.As(err, &me) {
		return me.SQLState
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// ParseID parses a memory or conversation id given as text; bad text is
// the *Error PostgreSQL gives for it (22P02), so a caller reports it as
// any other bad argument.
func ParseID(field, s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, &Error{Op: "parse", SQLState: "22P02", Message: field + ": invalid input syntax for type uuid: " + strconv.Quote(s)}
	}
	return id, nil
}

// SupportedAPI is the range of mneme SQL API versions (mneme.version())
// this package supports.
const SupportedAPI = ">=1.0.0 <2.0.0"

const supportedMajor = 1

// ErrUnsupportedVersion is the error of CheckVersion when the database's
// SQL API is not one this package supports, or has no mneme.version().
var ErrUnsupportedVersion = errors.New("unsupported mneme SQL API version")

func versionError(v string, cause error) error {
	if cause != nil {
		return fmt.Errorf("%w: mneme.version() does not exist: the database is not migrated or its mneme is too old; "+
			"this client supports SQL API %s (run `mneme migrate`): %v", ErrUnsupportedVersion, SupportedAPI, cause)
	}
	major, _ := strconv.Atoi(strings.SplitN(v, ".", 2)[0])
	hint := "run `mneme migrate` with a newer mneme"
	if major > supportedMajor {
		hint = "upgrade github.com/mneme-memory/mneme/client"
	}
	return fmt.Errorf("%w: mneme SQL API %s is not supported by this client (supports %s): %s", ErrUnsupportedVersion, v, SupportedAPI, hint)
}
