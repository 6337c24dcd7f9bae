#!/usr/bin/env bash
# make test: installs the TypeScript MCP SDK that tests/mcp_node_test.go
# drives mneme mcp with (npm ci from tests/mcp-node/package-lock.json).
# Without node/npm the test skips itself with a message.
set -euo pipefail
cd "$(dirname "$0")/../tests/mcp-node"
if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
  echo "mcp-node: node/npm not installed; TestMCPWithTypeScriptClient will be skipped (apt-get install nodejs npm)" >&2
  exit 0
fi
if [ -d node_modules/@modelcontextprotocol/sdk ] && [ node_modules/.package-lock.json -nt package-lock.json ]; then
  exit 0
fi
npm ci --no-audit --no-fund --loglevel=error
