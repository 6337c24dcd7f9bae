// Package sqlfiles embeds mneme's idempotent SQL layer: functions, views,
// triggers and grants, written with CREATE OR REPLACE and re-applied in file
// name order on every `mneme migrate`.
package sqlfiles

import "embed"

// FS holds the NNN-name.sql idempotent files.
//
//go:embed *.sql
var FS embed.FS

// Citus holds the one-time distribution of the tables on a Citus
// coordinator (`mneme migrate --citus`, docs/scale.md) and what every
// migrate of a distributed mneme makes on the workers afterwards.
//
//go:embed citus/distribute.sql citus/workers.sql
var Citus embed.FS

// CitusLayer holds the Citus forms of the SQL layer, sql/citus/NNN-*.sql:
// applied in name order after the files of FS, on a distributed mneme only.
// Each replaces one-server functions by name, written by hand where Citus
// needs another form (docs/scale.md, "What --citus does").
//
//go:embed citus/[0-9]*.sql
var CitusLayer embed.FS
