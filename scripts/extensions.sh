#!/usr/bin/env bash
# Builds the PostgreSQL extensions mneme supports (pgvector, Citus) from
# release sources into a private copy of the server's tree, for the tests:
#
#   scripts/extensions.sh DIR     DIR holds pgvector-*.tar.gz and/or
#                                 citus-*.tar.gz (and citus-*.patch files)
#
# It prints the bin directory of the private tree on its last line (point
# PG_BINDIR at it: the harness then starts its clusters from there, and the
# server finds the extensions in the tree's own lib and share). Nothing is
# installed into the system's PostgreSQL and nothing is written into the
# checkout. The result is cached by the sources' hashes, the server's
# version and this script's hash under $MNEME_EXTENSION_CACHE (default
# /var/cache/mneme/extensions as root, else ~/.cache/mneme/extensions), so
# a second run on the same machine builds nothing. As root with apt-get,
# missing build dependencies are installed from the system's packages.
#
# A patch named <tarball-base>-*.patch is applied where it is needed: the
# Citus compatibility patch only when the server's headers already define
# what it removes (Debian's 15.20 does, 15.18 does not).
set -euo pipefail

src=${1:-${MNEME_EXTENSION_SOURCES:-}}
if [ -z "$src" ] || [ ! -d "$src" ]; then
  echo "usage: $0 DIR (a directory of pgvector-*.tar.gz and citus-*.tar.gz; MNEME_EXTENSION_SOURCES)" >&2
  exit 2
fi
src=$(cd "$src" && pwd)
log() { echo "extensions: $*" >&2; }

pgvector_tar=$(ls "$src"/pgvector-*.tar.gz 2>/dev/null | sort -V | tail -n 1 || true)
citus_tar=$(ls "$src"/citus-*.tar.gz 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$pgvector_tar" ] && [ -z "$citus_tar" ]; then
  log "no pgvector-*.tar.gz or citus-*.tar.gz in $src"
  exit 2
fi

# The server the harness runs: the same search as sidecar/cluster.FindBinDir
# (PG_BINDIR is not consulted: it may name a tree this script made).
pg_bindir=""
if command -v pg_config >/dev/null; then pg_bindir=$(pg_config --bindir); fi
if [ -z "$pg_bindir" ] || [ ! -x "$pg_bindir/postgres" ]; then
  pg_bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
fi
if [ -z "$pg_bindir" ] || [ ! -x "$pg_bindir/postgres" ]; then
  log "no PostgreSQL server found (install the postgresql package; make test does)"
  exit 1
fi
major=$("$pg_bindir/postgres" --version | sed -E 's/.* ([0-9]+)(\.[0-9]+)?.*/\1/')
server_version=$("$pg_bindir/postgres" --version)

need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
have_pkg "postgresql-server-dev-$major" || need+=("postgresql-server-dev-$major")
have_pkg make || need+=(make)
have_pkg gcc || need+=(gcc)
if [ -n "$citus_tar" ]; then
  for p in libcurl4-openssl-dev liblz4-dev libzstd-dev libkrb5-dev libssl-dev libselinux1-dev libxslt1-dev libpam0g-dev libreadline-dev patch; do
    have_pkg "$p" || need+=("$p")
  done
fi
if [ ${#need[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    log "installing build dependencies with apt-get: ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    server_version=$("$pg_bindir/postgres" --version) # the dev package may upgrade the server
  elif ! command -v dpkg-query >/dev/null && [ -x "$pg_bindir/pg_config" ]; then
    : # not Debian: trust pg_config and the compiler that are there
  else
    log "missing build dependencies: ${need[*]} (sudo apt-get install ${need[*]})"
    exit 1
  fi
fi
pg_config="$pg_bindir/pg_config"

# The cache key: every input's hash, the server's exact version, this script.
key=$( { for f in "$pgvector_tar" "$citus_tar" "$src"/*.patch; do [ -f "$f" ] && sha256sum "$f" | cut -d' ' -f1; done
         echo "$server_version"; uname -m; sha256sum "$0" | cut -d' ' -f1; } | sha256sum | cut -c1-16)
if [ -n "${MNEME_EXTENSION_CACHE:-}" ]; then cache=$MNEME_EXTENSION_CACHE
elif [ "$(id -u)" = 0 ]; then cache=/var/cache/mneme/extensions
else cache=${XDG_CACHE_HOME:-$HOME/.cache}/mneme/extensions; fi
out="$cache/$key"
bindir_rel=${pg_bindir#/}
if [ -f "$out/ok" ]; then
  log "cached: $out ($(cat "$out/ok"))"
  echo "$out/root/$bindir_rel"
  exit 0
fi

start=$(date +%s)
mkdir -p "$cache"
chmod 755 "$cache" "$(dirname "$cache")" 2>/dev/null || true
rm -rf "$out" "$out.tmp"
mkdir -p "$out.tmp/root" "$out.tmp/build"
root="$out.tmp/root"
# A copy of the server's tree: PostgreSQL finds its share and lib
# directories relative to its binary, so the copy loads what is installed
# into it and nothing of the system's tree changes.
for d in "$("$pg_config" --bindir)/.." "$("$pg_config" --sharedir)" "$("$pg_config" --pkglibdir)"; do
  d=$(cd "$d" && pwd)
  mkdir -p "$root$(dirname "$d")"
  [ -e "$root$d" ] || cp -a "$d" "$root$d"
done

jobs=$(nproc 2>/dev/null || echo 2)
built=()
if [ -n "$pgvector_tar" ]; then
  log "building $(basename "$pgvector_tar")"
  b="$out.tmp/build/pgvector"; mkdir -p "$b"
  tar -xzf "$pgvector_tar" -C "$b" --strip-components=1
  # OPTFLAGS empty: no -march=native, so the tree runs on any machine of
  # this architecture that shares the cache.
  make -C "$b" -j"$jobs" PG_CONFIG="$pg_config" OPTFLAGS="" >"$out.tmp/pgvector.log" 2>&1 ||
    { tail -n 30 "$out.tmp/pgvector.log" >&2; log "pgvector build failed ($out.tmp/pgvector.log)"; exit 1; }
  make -C "$b" install PG_CONFIG="$pg_config" OPTFLAGS="" DESTDIR="$root" >>"$out.tmp/pgvector.log" 2>&1 ||
    { tail -n 30 "$out.tmp/pgvector.log" >&2; log "pgvector install failed"; exit 1; }
  built+=("$(basename "$pgvector_tar" .tar.gz)")
fi
if [ -n "$citus_tar" ]; then
  log "building $(basename "$citus_tar") (a few minutes)"
  b="$out.tmp/build/citus"; mkdir -p "$b"
  tar -xzf "$citus_tar" -C "$b" --strip-components=1
  base=$(basename "$citus_tar" .tar.gz)
  for p in "$src/$base"-*.patch; do
    [ -f "$p" ] || continue
    if [[ $p == *pg15-compat* ]] && ! grep -q have_createdb_privilege "$($pg_config --includedir-server)/commands/dbcommands.h" 2>/dev/null; then
      log "not applying $(basename "$p"): this server's headers do not define have_createdb_privilege"
      continue
    fi
    log "applying $(basename "$p")"
    patch -d "$b" -p1 --quiet <"$p"
  done
  (cd "$b" && ./configure PG_CONFIG="$pg_config" >"$out.tmp/citus.log" 2>&1) ||
    { tail -n 30 "$out.tmp/citus.log" >&2; log "citus configure failed ($out.tmp/citus.log)"; exit 1; }
  make -C "$b" -j"$jobs" >>"$out.tmp/citus.log" 2>&1 ||
    { tail -n 30 "$out.tmp/citus.log" >&2; log "citus build failed ($out.tmp/citus.log)"; exit 1; }
  make -C "$b" install DESTDIR="$root" >>"$out.tmp/citus.log" 2>&1 ||
    { tail -n 30 "$out.tmp/citus.log" >&2; log "citus install failed"; exit 1; }
  built+=("$base")
fi
rm -rf "$out.tmp/build"
echo "${built[*]} for $server_version, built in $(( $(date +%s) - start )) s" >"$out.tmp/ok"
chmod -R a+rX "$out.tmp"
mv "$out.tmp" "$out"
log "$(cat "$out/ok"): $out"
echo "$out/root/$bindir_rel"
