#!/usr/bin/env bash
# make test: installs node-postgres (pg) for docs/clients/loop.mjs, which
# tests/clients_test.go runs (npm ci from docs/clients/package-lock.json,
# into the git-ignored docs/clients/node_modules). Without node/npm the test
# fails saying so (.ci/run installs them).
set -euo pipefail
cd "$(dirname "$0")/../docs/clients"
if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
  echo "clients: node/npm not installed; TestClientExamples will fail (apt-get install nodejs npm)" >&2
  exit 0
fi
if [ -d node_modules/pg ] && [ node_modules/.package-lock.json -nt package-lock.json ]; then
  exit 0
fi
npm ci --no-audit --no-fund --loglevel=error
