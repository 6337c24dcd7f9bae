#!/usr/bin/env bash
# make eval: the evaluations, offline, against $DATABASE_URL (make eval sets
# it to a private cluster through scripts/with-test-db.sh). Each evaluation
# creates and drops its own scratch database on that server.
set -euo pipefail
cd "$(dirname "$0")/.."
MNEME=${MNEME:-bin/mneme-lab}

# --- eval: LoCoMo evidence recall -----------------------------------
# The data is CC BY-NC 4.0 and never copied into this repository: it is read
# from ../shared/data/locomo/ (or $LOCOMO_DATA).
LOCOMO_DATA=${LOCOMO_DATA:-}
if [ -z "$LOCOMO_DATA" ]; then
  for f in ../shared/data/locomo/locomo-dev.json ../../shared/data/locomo/locomo-dev.json; do
    if [ -f "$f" ]; then LOCOMO_DATA=$f; break; fi
  done
fi
if [ -z "$LOCOMO_DATA" ]; then
  echo "eval locomo: LoCoMo data not found; set LOCOMO_DATA=/path/to/locomo-dev.json (or locomo10.json)" >&2
  exit 1
fi
mkdir -p docs
# Cross-validated (docs/eval.md): the context's query-time settings chosen on
# four conversations and measured on the fifth, for each fold.
$MNEME eval locomo --data "$LOCOMO_DATA" --budget 1000 --plot docs/eval-locomo.svg \
  --folds 5 --choose 'context_window=1|2|3' --choose 'context_order="rank"|"newest"'
# --- end eval: LoCoMo ---------------------------------------------------------

# --- eval: BEAM evidence recall, knowledge updates, contradictions --
# BEAM states no license: read from ../shared/data/beam/ (or $BEAM_DATA),
# never copied here.
BEAM_DATA=${BEAM_DATA:-}
if [ -z "$BEAM_DATA" ]; then
  for d in ../shared/data/beam/100K ../../shared/data/beam/100K; do
    if [ -d "$d" ]; then BEAM_DATA=$d; break; fi
  done
fi
if [ -z "$BEAM_DATA" ]; then
  echo "eval beam: BEAM data not found; set BEAM_DATA=/path/to/beam/100K" >&2
  exit 1
fi
$MNEME eval beam --data "$BEAM_DATA" --budget 1000 --plot docs/eval-beam.svg \
  --folds 5 --choose 'context_window=1|2|3'
# --- end eval: BEAM -----------------------------------------------------------

# --- eval: feedback simulation -----------------------------------------------
# Review-based vs auto-GOOD vs no reinforcement, precision@5 of mneme.search
# over 30 simulated sessions (docs/pipelines.md). Deterministic; its own
# scratch database.
$MNEME eval feedback --plot docs/feedback.svg
# --- end eval: feedback -------------------------------------------------------

# --- eval: lifecycle simulation -------------------------------------
# A deterministic year of use: per label, the share of memories active,
# inactive and purged, purge off and on (docs/forgetting.md).
$MNEME eval lifecycle --plot docs/lifecycle.svg

# --- eval: belief revision suite ------------------------------------
# Scripted conversations in which facts change (sidecar/eval/revision, written
# for mneme, no benchmark data): per action precision and recall of the
# offline classifier (docs/revision.md). Deterministic; a scratch database per
# candidate. The LLM classifier against a scripted model is a test:
# go test -v -run TestScriptedModel ./sidecar/eval/revision
$MNEME eval revision --quiet --folds 5 \
  --choose 'revision_duplicate_similarity=0.7|0.8|0.9' --choose 'revision_candidates=5|10|20'
# --- end eval: revision -------------------------------------------------------
