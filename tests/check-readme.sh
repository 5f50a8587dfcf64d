#!/bin/sh
# check-readme.sh - the C example in README compiles against the built
# library and prints what README says it prints.
set -u
: "${srcdir:=.}"
: "${top_builddir:=..}"
: "${CC:=cc}"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/m3idx-readme.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
sed -n '/^<<<example$/,/^example>>>$/p' "$srcdir/../README" | sed '1d;$d' >"$tmp/example.c"
[ -s "$tmp/example.c" ] || { echo "FAIL: no example in README"; exit 1; }
lt="$top_builddir/libtool"
if ! $lt --mode=link --tag=CC $CC ${CFLAGS:-} ${LDFLAGS:-} -std=c11 -Wall -Werror -I"$srcdir/../lib" -o "$tmp/example" \
    "$tmp/example.c" "$top_builddir/lib/libm3idx.la" >"$tmp/err" 2>&1; then
  echo "FAIL: README example does not compile:"; cat "$tmp/err"; exit 1
fi
out=$($lt --mode=execute "$tmp/example")
[ "$out" = "2 0 1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 " ] || { echo "FAIL: README example printed '$out'"; exit 1; }
echo "check-readme: the README example compiles and prints what README says"
