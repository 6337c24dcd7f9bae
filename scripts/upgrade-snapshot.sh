#!/usr/bin/env bash
# Usage: scripts/upgrade-snapshot.sh REF
# Writes tests/testdata/upgrade/REF-<variant>.sql.gz for
# TestUpgradeFromPreviousRelease: a database as release REF leaves it (REF's
# own `mneme migrate`, then REF's docs/examples.sql as data), dumped with
# pg_dump, for the array and the pgvector variant. Run it when a release is
# cut, with DATABASE_URL pointing at a PostgreSQL server that has pgvector
# (the scratch database mneme_upgrade_snapshot is made and dropped there);
# then point upgradeFrom in tests/upgrade_test.go at REF and delete the
# older snapshot.
set -euo pipefail
cd "$(dirname "$0")/.."
ref=${1:?usage: scripts/upgrade-snapshot.sh REF (a commit or tag of the previous release)}
: "${DATABASE_URL:?set DATABASE_URL to a server for the scratch database}"
pgbin=${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)}
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
git archive "$ref" | tar -x -C "$src"
(cd "$src" && go build -o mneme ./sidecar)
db=mneme_upgrade_snapshot
url=$(printf '%s' "$DATABASE_URL" | sed -E "s#^(postgres(ql)?://[^/]*)/[^?]*#\1/$db#")
for variant in array pgvector; do
  "$pgbin/psql" -X -q -v ON_ERROR_STOP=1 "$DATABASE_URL" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
  DATABASE_URL=$url MNEME_VECTOR=$variant MNEME_LOG_LEVEL=warn "$src/mneme" migrate >/dev/null
  "$pgbin/psql" -X -q -v ON_ERROR_STOP=1 -f "$src/docs/examples.sql" "$url" >/dev/null
  "$pgbin/pg_dump" --no-owner "$url" | gzip -9n > "tests/testdata/upgrade/$ref-$variant.sql.gz"
  echo "tests/testdata/upgrade/$ref-$variant.sql.gz"
done
"$pgbin/psql" -X -q "$DATABASE_URL" -c "DROP DATABASE IF EXISTS $db"
