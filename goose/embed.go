// Package migrations embeds mneme's numbered goose migrations (tables,
// columns, indexes). They are applied once each and never edited after a
// release (frozen.sha256 lists the released ones; `make lint` checks them).
// Functions and views live in ../sql and are re-applied on every migrate,
// with one exception: mneme._is_worker(), which every row policy calls,
// has its one-server body only here (goose 00045 created it, 00061 made it
// an inlinable SQL function without SET search_path); on Citus,
// ../sql/citus/200-functions.sql replaces it. A migration also creates the functions
// its own statements need (mneme._tenant() in 00045 and 00054), which
// ../sql then replaces.
package migrations

import "embed"

// FS holds the NNNNN_name.sql goose migrations.
//
//go:embed *.sql
var FS embed.FS
