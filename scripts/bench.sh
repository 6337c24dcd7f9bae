#!/usr/bin/env bash
# make bench: every benchmark, against $DATABASE_URL (make bench runs this
# under scripts/with-test-db.sh, which provides a private cluster). Each
# engineer's benchmarks sit in their own marked block.
set -euo pipefail
cd "$(dirname "$0")/.."
LAB=bin/mneme-lab

# --- retrieval (mneme-lab bench retrieve; docs/retrieval.md) ---------------------
# Sizes that finish in a few minutes on a 2-core machine; docs/retrieval.md
# has the 100,000-memory runs and their exact commands.
$LAB bench retrieve --memories 10000
$LAB bench retrieve --memories 100000 --conversations 1000
$LAB bench retrieve --memories 2000 --vector array --queries 20
# --- end retrieval -------------------------------------------------------------

# --- sidecar (mneme-lab bench events; docs/sidecar.md) ----------------------------
# Per transport: commit-to-handler-start latency (200 single-job commits) and
# no-op jobs per second (5,000 jobs enqueued in one transaction).
$LAB bench events
# --- end sidecar ---------------------------------------------------------------

# Concurrent writers: 50 connections x 40 messages, one
# conversation and fifty; every add_message must succeed.
$LAB bench writers

# --- scale (mneme-lab bench scale; docs/performance.md) ----------------------------
# Every call as mneme_app under row security at growing sizes, over 10,000
# conversations and 1,000 tenants; the database is kept and grown, so a
# second run reuses it. make bench stops at 100,000 (about ten minutes on
# two cores); docs/results.md has the 1,000,000-memory run and its command.
$LAB bench scale --sizes 10000,100000 --queries 30
# Ingest with the sidecars running (docs/sidecar.md).
$LAB bench ingest --conversations 100 --duration 30s --rate 1000
# --- end scale -------------------------------------------------------------------

