#!/usr/bin/env bash
# make bench: every benchmark, against $DATABASE_URL (make bench runs this
# under scripts/with-test-db.sh, which provides a private cluster). Each
# engineer's benchmarks sit in their own marked block.
set -euo pipefail
cd "$(dirname "$0")/.."
MNEME=bin/mneme

# --- retrieval (mneme bench retrieve; docs/retrieval.md) ---------------------
# Sizes that finish in a few minutes on a 2-core machine; docs/retrieval.md
# has the 100,000-memory runs and their exact commands.
$MNEME bench retrieve --memories 10000
$MNEME bench retrieve --memories 100000 --conversations 1000
$MNEME bench retrieve --memories 2000 --vector array --queries 20
# --- end retrieval -------------------------------------------------------------

# --- sidecar (mneme bench events; docs/sidecar.md) ----------------------------
# Per transport: commit-to-handler-start latency (200 single-job commits) and
# no-op jobs per second (5,000 jobs enqueued in one transaction).
$MNEME bench events
# --- end sidecar ---------------------------------------------------------------

# Concurrent writers (issue 12): 50 connections x 40 messages, one
# conversation and fifty; every add_message must succeed.
$MNEME bench writers
