#!/usr/bin/env bash
# make test: every deployment this machine can run, one after another
# (docs/tests.md), against private PostgreSQL clusters the harness starts:
#
#   array     the array fallback: every package's tests
#   pgvector  the packages that use a database, with pgvector
#   citus     a Citus coordinator and two workers: the Citus suite
#             (tests named TestCitus* and those listed in tests/citus_suite.txt)
#
# pgvector and Citus run where the server can load them: installed on the
# system, or built by scripts/extensions.sh from the release sources in
# $MNEME_EXTENSION_SOURCES (.ci/run points it at ../shared/vendor). A
# deployment that cannot run is skipped with one line naming what to
# install, unless $MNEME_TEST_REQUIRE names it (then the run fails).
# The last line is
#   deployments: array N passed, pgvector N passed, citus N passed
# with "skipped (reason)" for a deployment that did not run.
set -uo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
read -r -a flags <<<"${TESTFLAGS:--count=1 -timeout 45m}"
pkgs=${PKGS:-./...}
require=" ${MNEME_TEST_REQUIRE:-} "

./scripts/test-deps.sh || exit 1

if [ -n "${MNEME_EXTENSION_SOURCES:-}" ]; then
  if ! bindir=$(./scripts/extensions.sh "$MNEME_EXTENSION_SOURCES" | tail -n 1) || [ -z "$bindir" ]; then
    echo "test: building the extensions from $MNEME_EXTENSION_SOURCES failed (above)" >&2
    exit 1
  fi
  export PG_BINDIR=$bindir
  echo "== extensions: $SECONDS s"
fi

# The server's share directory (the private tree's when PG_BINDIR names
# one: pg_config finds it relative to itself).
pg_config=pg_config
[ -n "${PG_BINDIR:-}" ] && pg_config="$PG_BINDIR/pg_config"
sharedir=$("$pg_config" --sharedir 2>/dev/null || true)
has_ext() { [ -n "$sharedir" ] && [ -f "$sharedir/extension/$1.control" ]; }

$GO build -o bin/testreport ./scripts/testreport || exit 1

status=0
summary=()
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
# run NAME PACKAGES... [go test flags]: one deployment.
run() {
  local name=$1; shift
  local start=$SECONDS
  echo "== deployment $name: go test $*"
  MNEME_TEST_DEPLOYMENT=$name $GO test -json "${flags[@]}" "$@" 2>&1 | bin/testreport -label "$name" | tee "$tmp"
  local rcs=("${PIPESTATUS[@]}")
  echo "== deployment $name: $((SECONDS - start)) s"
  # the report's last line: "NAME: P passed, F failed, S skipped"
  local passed failed
  passed=$(tail -n 1 "$tmp" | sed -nE 's/^[^:]*: ([0-9]+) passed.*/\1/p')
  failed=$(tail -n 1 "$tmp" | sed -nE 's/.* ([0-9]+) failed.*/\1/p')
  if [ "${rcs[0]}" != 0 ] || [ "${rcs[1]}" != 0 ] || [ "${passed:-0}" = 0 ]; then
    status=1
    summary+=("$name ${passed:-0} passed (${failed:-?} failed)")
  else
    summary+=("$name $passed passed")
  fi
}
# skip NAME SHORT LONG: a deployment that cannot run here.
skip() {
  echo "test: deployment $1 skipped: $3"
  summary+=("$1 skipped ($2)")
  if [[ $require == *" $1 "* ]]; then
    echo "test: MNEME_TEST_REQUIRE names $1: failing"
    status=1
  fi
}

run array $pkgs

if has_ext vector; then
  # The packages whose tests use a database (sidecar/dbtest).
  db_pkgs=$($GO list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' $pkgs |
    awk '/mneme\/sidecar\/dbtest( |$)/ && $1 !~ /\/dbtest$/ {print $1}')
  if [ -n "$db_pkgs" ]; then
    run pgvector $db_pkgs
  else
    skip pgvector "no package uses a database" "none of $pkgs uses a database"
  fi
else
  skip pgvector "pgvector not installed" "this PostgreSQL has no pgvector: set MNEME_EXTENSION_SOURCES to a directory with pgvector-*.tar.gz, or install pgvector for PostgreSQL $($pg_config --version | sed -E 's/[^0-9]*([0-9]+).*/\1/') (docs/tests.md)"
fi

if has_ext citus; then
  suite='^TestCitus'
  if [ -f tests/citus_suite.txt ]; then
    while read -r t; do
      t=${t%%#*}; t=${t//[[:space:]]/}
      [ -n "$t" ] && suite+="|^${t#^}\$"
    done <tests/citus_suite.txt
  fi
  run citus ./tests -run "$suite"
else
  skip citus "Citus not installed" "this PostgreSQL has no Citus: set MNEME_EXTENSION_SOURCES to a directory with citus-*.tar.gz (docs/tests.md)"
fi

line="deployments:"
for i in "${!summary[@]}"; do
  [ "$i" -gt 0 ] && line+=","
  line+=" ${summary[$i]}"
done
echo "$line"
exit $status
