// Package migrations embeds mneme's numbered goose migrations (tables,
// columns, indexes). They are applied once each and never edited after a
// release; functions and views live in ../sql and are re-applied on every
// migrate.
package migrations

import "embed"

// FS holds the NNNNN_name.sql goose migrations.
//
//go:embed *.sql
var FS embed.FS
