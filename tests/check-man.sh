#!/bin/sh
# check-man.sh - the man pages: every exported function has a page, the
# pages lint clean (mandoc -T lint -W warning, and groff -ww), alias pages
# point at pages that exist, and every EXAMPLES program compiles against
# the built library and runs.
set -u
: "${srcdir:=.}"
: "${top_builddir:=..}"
: "${CC:=cc}"
man=$srcdir/../man
tmp=$(mktemp -d "${TMPDIR:-/tmp}/m3idx-man.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
failures=0 checks=0
pass() { checks=$((checks + 1)); }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL: $*"; }

# Every function the header exports has a page.
for f in $(grep 'M3IDX_API' "$srcdir/../lib/m3idx.h" | grep -o 'm3idx_[a-z0-9_]*(' | tr -d '('); do
  [ -f "$man/$f.3" ] && pass || fail "no man page for $f"
done

for page in "$man"/*.[137]; do
  name=$(basename "$page")
  if head -1 "$page" | grep -q '^\.so '; then
    target=$(head -1 "$page" | sed 's/^\.so man3\///')
    [ -f "$man/$target" ] && pass || fail "$name: .so to a missing $target"
    continue
  fi
  if command -v mandoc >/dev/null 2>&1; then
    out=$(mandoc -T lint -W warning "$page" 2>&1)
    [ -z "$out" ] && pass || fail "mandoc lint $name: $out"
  fi
  if command -v groff >/dev/null 2>&1; then
    out=$(groff -ww -z -man "$page" 2>&1)
    [ -z "$out" ] && pass || fail "groff -ww $name: $out"
  fi
done

# EXAMPLES: every .EX block with a main() compiles and runs.
lt="$top_builddir/libtool"
n=0
for page in "$man"/*.3; do
  head -1 "$page" | grep -q '^\.so ' && continue
  awk '/^\.EX$/{on=1; next} /^\.EE$/{on=0; print "/*--end--*/"; next} on{print}' "$page" |
    sed -e 's/\\e/\\/g' -e 's/\\-/-/g' -e 's/\\(dq/"/g' >"$tmp/all.c"
  # split into one file a block
  awk -v dir="$tmp" -v base="$(basename "$page" .3)" '
    /^\/\*--end--\*\/$/ { k++; next }
    { print > (dir "/" base "-" k ".c") }' "$tmp/all.c"
done
for src in "$tmp"/*-*.c; do
  [ -f "$src" ] || continue
  grep -q 'int main' "$src" || continue
  exe=${src%.c}
  # libm3idx_mpi's examples need MPI and run under mpiexec (2 ranks).
  mpi_flags= mpi_lib= run=
  if grep -q 'm3idx_mpi.h' "$src"; then
    if [ "${HAVE_MPI:-no}" != yes ]; then
      echo "check-man: $(basename "$src") not built: configured without MPI"
      continue
    fi
    mpi_flags="-I$srcdir/../lib-mpi $MPI_CFLAGS" mpi_lib="$top_builddir/lib-mpi/libm3idx_mpi.la $MPI_LIBS"
    run="$MPIEXEC -n 2"
    # As check-mpi.sh says: Open MPI's leaks at MPI_Finalize, not ours.
    case "${CFLAGS:-}" in
    *-fsanitize=*address*) run="env ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 $run" ;;
    esac
    "$MPIEXEC" --version 2>&1 | grep -Eq "Open MPI|OpenRTE" && run="$run --oversubscribe" &&
      [ "$(id -u)" = 0 ] && run="$run --allow-run-as-root"
  fi
  n=$((n + 1))
  if ! $lt --mode=link --tag=CC $CC ${CFLAGS:-} ${LDFLAGS:-} -std=c11 -Wall -Werror -I"$srcdir/../lib" $mpi_flags -o "$exe" \
      "$src" $mpi_lib "$top_builddir/lib/libm3idx.la" -lm >"$tmp/err" 2>&1; then
    fail "example $(basename "$src") does not compile: $(cat "$tmp/err")"
  elif ! M3IDX_BACKEND=cpu $lt --mode=execute $run "$exe" >"$tmp/out" 2>&1; then
    fail "example $(basename "$src") fails: $(cat "$tmp/out")"
  else
    pass
  fi
done
[ "$n" -ge 9 ] && pass || fail "only $n examples found"
echo "check-man: $checks checks, $failures failures ($n examples)"
[ "$failures" -eq 0 ]
