#!/bin/sh
# check-exports.sh - what libm3idx exports: every function m3idx.h
# declares M3IDX_API, in a released version node (M3IDX_0.x); the hooks of
# m3idx's own bench and tests (m3idx__*) only in M3IDX_PRIVATE; nothing
# else.
set -u
: "${M3IDX_LIBRARY:=../lib/.libs/libm3idx.so}"
: "${srcdir:=.}"
if [ ! -f "$M3IDX_LIBRARY" ]; then
  echo "SKIP: no shared library at $M3IDX_LIBRARY (a static build)"
  exit 77
fi
if ! command -v nm >/dev/null 2>&1; then
  echo "SKIP: nm (binutils) is not installed"
  exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/m3idx-exports.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
failures=0 checks=0
pass() { checks=$((checks + 1)); }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL: $*"; }

# name@@NODE of every defined dynamic symbol but the version nodes' own.
nm -D --defined-only "$M3IDX_LIBRARY" | awk '$2 != "A" { print $3 }' | sort > "$tmp/exported"
[ -s "$tmp/exported" ] && pass || fail "nm -D lists no symbol of $M3IDX_LIBRARY"

for f in $(grep 'M3IDX_API' "$srcdir/../lib/m3idx.h" | grep -o 'm3idx_[a-z0-9_]*(' | tr -d '('); do
  grep -q "^$f@@M3IDX_0\.[0-9]*\$" "$tmp/exported" && pass ||
    fail "$f (m3idx.h) is not exported in a released version node"
done
while read -r sym; do
  name=${sym%%@*} node=${sym##*@}
  case $name in
  m3idx__*) [ "$node" = M3IDX_PRIVATE ] && pass || fail "$sym: a private hook outside M3IDX_PRIVATE" ;;
  m3idx_*) grep -q "M3IDX_API[^;]*[ *]$name(" "$srcdir/../lib/m3idx.h" && pass ||
    fail "$sym: exported, but not declared M3IDX_API in m3idx.h" ;;
  *) fail "$sym: not an m3idx symbol" ;;
  esac
done < "$tmp/exported"
grep -q '^m3idx__plugin_devtools@@M3IDX_PRIVATE$' "$tmp/exported" && pass ||
  fail "m3idx__plugin_devtools is not in M3IDX_PRIVATE"

echo "check-exports: $checks checks, $failures failures"
[ "$failures" -eq 0 ]
