#!/usr/bin/env bash
# Runs a command with DATABASE_URL pointing at a PostgreSQL for tests: the
# caller's DATABASE_URL if set, else a private cluster in .mneme/test that is
# started now and stopped afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${DATABASE_URL:-}" ]; then
  exec "$@"
fi
DATABASE_URL="$(bin/mneme-lab cluster url --dir .mneme/test --db postgres)"
export DATABASE_URL
trap 'bin/mneme-lab cluster stop --dir .mneme/test >/dev/null 2>&1 || true' EXIT
"$@"
