#!/usr/bin/env bash
# make test: what the tests need besides Go and PostgreSQL (the harness
# installs PostgreSQL itself). From the system's packages, when missing and
# when run as root with apt-get: node and npm (the TypeScript MCP client of
# tests/mcp_node_test.go, node-postgres of docs/clients, the TypeScript
# package clients/typescript), Python's psycopg 3 and pytest for Debian's
# /usr/bin/python3 (docs/clients/loop.py, clients/python), PgBouncer
# (the pool tests) and Chromium (the browser tests of sidecar/ui). Then the
# npm packages, from each package-lock.json into a git-ignored node_modules.
# A test whose tool is still missing fails (or, the MCP test, skips) saying
# what to install.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v node >/dev/null && command -v npm >/dev/null || missing+=(nodejs npm)
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import psycopg' 2>/dev/null || missing+=(python3-psycopg)
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import pytest' 2>/dev/null || missing+=(python3-pytest)
command -v pgbouncer >/dev/null || [ -x /usr/sbin/pgbouncer ] || missing+=(pgbouncer)
command -v chromium >/dev/null || [ -n "${MNEME_UI_BROWSER:-}" ] || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "test-deps: installing ${missing[*]} with apt-get" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "test-deps: missing ${missing[*]}; install them (sudo apt-get install ${missing[*]}) or the tests that need them fail" >&2
  fi
fi

command -v npm >/dev/null && command -v node >/dev/null || exit 0
for dir in tests/mcp-node clients/typescript docs/clients; do  # clients/typescript first: docs/clients links it
  lock="$dir/package-lock.json"
  if [ -d "$dir/node_modules" ] && [ "$dir/node_modules/.package-lock.json" -nt "$lock" ]; then
    continue
  fi
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
done
