#!/bin/sh
# check-cli.sh - the m3idx command: `topk' bit for bit against the tests'
# oracle on seeded decode and prefill cases, the committed golden vectors,
# `encode' against an encoder written from SPEC section 3, and every bad
# input: a non-zero exit, a message naming the argument, no output file.
# With M3IDX_WRAP set (CI: libtool --mode=execute valgrind --error-exitcode=97),
# every run goes through it, and exit status 97 is a failure.
set -u
: "${M3IDX:=../cli/m3idx}"
: "${HELPER:=./cli-helper}"
: "${srcdir:=.}"
case ${M3IDX_BACKEND:-} in
hip | HIP)
  if ! "$M3IDX" --version | grep -q '^hip: yes'; then
    echo "SKIP: M3IDX_BACKEND=hip, but $("$M3IDX" --version | grep '^hip:')"
    exit 77
  fi ;;
esac
# shellcheck disable=SC2086 # M3IDX_WRAP is a command line
m3idx_run() { ${M3IDX_WRAP:-} "$M3IDX" "$@"; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/m3idx-cli.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
failures=0
checks=0

pass() { checks=$((checks + 1)); }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL: $*"; }

# run_case DIR: m3idx topk on DIR's inputs, outputs compared byte for byte.
run_case() {
  d=$1
  set -- $(cat "$d/args") --query "$d/query.npy" --pages "$d/pages.npy" \
    --block-table "$d/block_table.npy" --seq-lens "$d/seq_lens.npy"
  if [ -f "$d/cu_seqlens_q.npy" ]; then
    set -- "$@" --cu-seqlens-q "$d/cu_seqlens_q.npy" --context-lens "$d/context_lens.npy"
  fi
  rm -f "$tmp/topk.npy" "$tmp/scores.npy"
  if ! m3idx_run topk "$@" --out "$tmp/topk.npy" --scores-out "$tmp/scores.npy" 2>"$tmp/err"; then
    fail "$d: m3idx topk failed: $(cat "$tmp/err")"
    return
  fi
  if cmp -s "$tmp/topk.npy" "$d/expected_topk.npy" && cmp -s "$tmp/scores.npy" "$d/expected_scores.npy"; then
    pass
  else
    fail "$d: output differs from the expected files"
  fi
}

# Seeded cases, fresh each run.
for kind in decode prefill special; do
  for seed in 1 2 3 4 5 6; do
    mkdir -p "$tmp/$kind$seed"
    "$HELPER" gen "$tmp/$kind$seed" "$kind" "$((seed * 7919 + 13))" || { fail "gen $kind $seed"; continue; }
    run_case "$tmp/$kind$seed"
  done
done

# Committed golden vectors: an arithmetic change cannot pass unnoticed.
for d in "$srcdir"/golden/*/; do
  d=${d%/}
  [ -f "$d/args" ] && run_case "$d"
done

# encode: the library's encoder against the helper's, and the helper against
# a golden page file.
"$HELPER" keys "$tmp/keys.npy" 300 77 || fail "keys"
if m3idx_run encode --keys "$tmp/keys.npy" --out "$tmp/pages.npy" 2>"$tmp/err"; then
  "$HELPER" expect-pages "$tmp/keys.npy" "$tmp/expect.npy"
  cmp -s "$tmp/pages.npy" "$tmp/expect.npy" && pass || fail "encode differs from SPEC's encoder"
else
  fail "m3idx encode failed: $(cat "$tmp/err")"
fi
if [ -f "$srcdir/golden/encode/keys.npy" ]; then
  m3idx_run encode --keys "$srcdir/golden/encode/keys.npy" --out "$tmp/gp.npy" &&
    cmp -s "$tmp/gp.npy" "$srcdir/golden/encode/expected_pages.npy" && pass ||
    fail "encode of the golden keys differs"
fi

# expect_fail NAME TEXT ARGS...: exit non-zero, TEXT in the message, no --out.
expect_fail() {
  name=$1 text=$2
  shift 2
  rm -f "$tmp/out.npy" "$tmp/s.npy"
  m3idx_run "$@" >"$tmp/stdout" 2>"$tmp/err"
  rc=$?
  if [ "$rc" -eq 0 ]; then
    fail "$name: exit 0"
  elif [ "$rc" -eq 97 ]; then
    fail "$name: valgrind found errors: $(cat "$tmp/err")"
  elif ! grep -q -F -- "$text" "$tmp/err"; then
    fail "$name: message '$(cat "$tmp/err")' lacks '$text'"
  elif [ -e "$tmp/out.npy" ] || [ -e "$tmp/s.npy" ] || ls "$tmp" | grep -q 'tmp'; then
    fail "$name: an output file was written"
  else
    pass
  fi
}

D=$tmp/decode1
P=$tmp/prefill1
B=$tmp/bad
mkdir -p "$B"
dec() { # decode arguments with one file replaced: dec NAME FILE
  q=$D/query.npy pg=$D/pages.npy bt=$D/block_table.npy sl=$D/seq_lens.npy
  case $1 in query) q=$2 ;; pages) pg=$2 ;; bt) bt=$2 ;; sl) sl=$2 ;; esac
  echo topk $(cat "$D/args") --query "$q" --pages "$pg" --block-table "$bt" --seq-lens "$sl" --out "$tmp/out.npy" --scores-out "$tmp/s.npy"
}
pre() {
  cu=$P/cu_seqlens_q.npy cl=$P/context_lens.npy sl=$P/seq_lens.npy bt=$P/block_table.npy
  case $1 in cu) cu=$2 ;; cl) cl=$2 ;; sl) sl=$2 ;; bt) bt=$2 ;; esac
  echo topk $(cat "$P/args") --query "$P/query.npy" --pages "$P/pages.npy" --block-table "$bt" --seq-lens "$sl" --cu-seqlens-q "$cu" --context-lens "$cl" --out "$tmp/out.npy"
}

expect_fail "no --mode" "--mode is required" topk --query "$D/query.npy" --out "$tmp/out.npy"
expect_fail "bad --mode" "--mode 'sideways'" $(dec none x) --mode sideways
expect_fail "bad --query-dtype" "--query-dtype 'fp8'" $(dec none x) --query-dtype fp8
expect_fail "unknown option" "unknown or incomplete option '--frobnicate'" $(dec none x) --frobnicate
expect_fail "missing --out value" "unknown or incomplete option" topk --out
expect_fail "stray argument" "unexpected argument 'extra'" $(dec none x) extra
expect_fail "missing file" "--query: cannot open" $(dec query "$B/none.npy")
printf 'not an npy file at all' >"$B/text.npy"
expect_fail "not npy" "is not a .npy file" $(dec pages "$B/text.npy")
for k in fortran bigendian truncate trailing v3 magic f8 4d twodescr; do
  "$HELPER" damage "$D/seq_lens.npy" "$B/sl-$k.npy" "$k"
done
expect_fail "fortran order" "Fortran-ordered" $(dec sl "$B/sl-fortran.npy")
expect_fail "big-endian" "big-endian" $(dec sl "$B/sl-bigendian.npy")
expect_fail "truncated" "--seq-lens" $(dec sl "$B/sl-truncate.npy")
expect_fail "trailing bytes" "its shape needs" $(dec sl "$B/sl-trailing.npy")
expect_fail "npy format 3.0" "only 1.0 and 2.0" $(dec sl "$B/sl-v3.npy")
expect_fail "bad magic" "is not a .npy file" $(dec sl "$B/sl-magic.npy")
expect_fail "wrong dtype" "dtype '<f8', expected int32" $(dec sl "$B/sl-f8.npy")
expect_fail "descr given twice" "header gives 'descr' more than once" $(dec sl "$B/sl-twodescr.npy")
"$HELPER" damage "$D/block_table.npy" "$B/bt-4d.npy" 4d
expect_fail "wrong dimensions" "4 dimensions, expected 2" $(dec bt "$B/bt-4d.npy")
expect_fail "pages of the wrong dtype" "--pages: " $(dec pages "$D/block_table.npy")
"$HELPER" zeros "$B/narrow-pages.npy" "|u1" 3 8192
expect_fail "pages of the wrong width" "--pages has shape [3, 8192], expected [num_pages, 8704]" $(dec pages "$B/narrow-pages.npy")
"$HELPER" damage "$D/query.npy" "$B/q-v2.npy" v2
# format 2.0 is read: the same output as format 1.0
if m3idx_run $(dec query "$B/q-v2.npy") 2>"$tmp/err" && cmp -s "$tmp/out.npy" "$D/expected_topk.npy"; then
  pass
else
  fail "npy format 2.0 input: $(cat "$tmp/err")"
fi
rm -f "$tmp/out.npy" "$tmp/s.npy"
expect_fail "wrong --query-dtype for the file" "expected uint" $(dec none x) --query-dtype "$(grep -q bf16 "$D/args" && echo e4m3 || echo bf16)"
expect_fail "--query-len disagrees" "--query-len" $(dec none x) --query-len 7
expect_fail "--query-len 0" "--query-len is 0" $(dec none x) --query-len 0
expect_fail "non-finite scale" "--scale is nan" $(dec none x) --scale nan
expect_fail "infinite scale" "--scale is inf" $(dec none x) --scale inf
expect_fail "scale not a number" "--scale 'abc'" $(dec none x) --scale abc
expect_fail "I + L > 16" "--init-blocks 9 and --local-blocks 8" $(dec none x) --init-blocks 9 --local-blocks 8
expect_fail "negative init" "--init-blocks -1" $(dec none x) --init-blocks -1
expect_fail "prefill options in decode" "for --mode prefill only" $(dec none x) --context-lens "$P/context_lens.npy"
expect_fail "backend name" "--backend 'gpu'" $(dec none x) --backend gpu
cp "$D/seq_lens.npy" "$B/sl-big.npy"
"$HELPER" set-i32 "$B/sl-big.npy" 0 0
expect_fail "seq_len below query_len" "--seq-lens[0] is 0" $(dec sl "$B/sl-big.npy")
cp "$D/block_table.npy" "$B/bt-bad.npy"
"$HELPER" set-i32 "$B/bt-bad.npy" 0 -1
expect_fail "page id -1" "--block-table[0][0] is -1, outside [0, num_pages" $(dec bt "$B/bt-bad.npy")
"$HELPER" set-i32 "$B/bt-bad.npy" 0 100000
expect_fail "page id past the end" "--block-table[0][0] is 100000" $(dec bt "$B/bt-bad.npy")
cp "$P/cu_seqlens_q.npy" "$B/cu.npy"
"$HELPER" set-i32 "$B/cu.npy" 0 5
expect_fail "cu_seqlens_q[0] != 0" "--cu-seqlens-q[0] is 5" $(pre cu "$B/cu.npy")
cp "$P/context_lens.npy" "$B/cl.npy"
"$HELPER" set-i32 "$B/cl.npy" 0 -2
expect_fail "negative context" "--context-lens[0] is -2" $(pre cl "$B/cl.npy")
"$HELPER" set-i32 "$B/cl.npy" 0 99999
expect_fail "context > seq_len" "--context-lens[0] is 99999" $(pre cl "$B/cl.npy")
expect_fail "prefill without cu" "needs --cu-seqlens-q" $(dec none x) --mode prefill
expect_fail "unwritable --out" "cannot write" $(dec none x) --out "$B/no/such/dir/out.npy"
expect_fail "same out files" "name the same file" $(dec none x) --scores-out "$tmp/out.npy"
expect_fail "encode: wrong key dtype" "expected float32" encode --keys "$D/block_table.npy" --out "$tmp/out.npy"
"$HELPER" zeros "$B/k64.npy" "<f4" 5 64
expect_fail "encode: wrong key width" "expected [tokens, 128]" encode --keys "$B/k64.npy" --out "$tmp/out.npy"
expect_fail "encode: no --keys" "--keys is required" encode --out "$tmp/out.npy"
expect_fail "unknown command" "unknown command 'frob'" frob

# verify: topk's own output is exact (exit 0); a slot with -5 is wrong
# (exit 1, the row named); a bad option is exit 2.
V="$(cat "$D/args") --query $D/query.npy --pages $D/pages.npy --block-table $D/block_table.npy --seq-lens $D/seq_lens.npy"
# shellcheck disable=SC2086
if m3idx_run topk $V --out "$B/v-topk.npy" --scores-out "$B/v-scores.npy" 2>"$tmp/err" &&
  m3idx_run verify $V --candidate "$B/v-topk.npy" --candidate-scores "$B/v-scores.npy" >"$tmp/out" 2>"$tmp/err" &&
  grep -q " 0 equivalent, 0 wrong" "$tmp/out"; then
  pass
else
  fail "verify of topk's own output: $(cat "$tmp/out" "$tmp/err")"
fi
cp "$B/v-topk.npy" "$B/v-bad.npy"
"$HELPER" set-i32 "$B/v-bad.npy" 15 -5
# shellcheck disable=SC2086
m3idx_run verify $V --candidate "$B/v-bad.npy" --json >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] && grep -q '"head": 0, "row": 0' "$tmp/out" && pass ||
  fail "verify of a wrong candidate: exit $rc, $(cat "$tmp/out" "$tmp/err")"
# shellcheck disable=SC2086
expect_fail "verify --order" "--order 'up' is not desc or any" verify $V --candidate "$B/v-topk.npy" --order up
# shellcheck disable=SC2086
expect_fail "verify without --candidate" "--candidate is required" verify $V

# A prefill with no rows reads no block and sizes nothing: a request of
# 2^31 - 1 tokens with a 1-column block table gives an empty top-k.
"$HELPER" zeros "$B/q0.npy" "<u2" 0 4194304 128
"$HELPER" zeros "$B/pg1.npy" "|u1" 1 8704
"$HELPER" zeros "$B/bt1.npy" "<i4" 1 1
"$HELPER" zeros "$B/cu0.npy" "<i4" 2
"$HELPER" fill-i32 "$B/sl-max.npy" 2147483647 1
rm -f "$tmp/out.npy"
if m3idx_run topk --mode prefill --query "$B/q0.npy" --query-dtype bf16 --pages "$B/pg1.npy" \
    --block-table "$B/bt1.npy" --seq-lens "$B/sl-max.npy" --cu-seqlens-q "$B/cu0.npy" \
    --context-lens "$B/sl-max.npy" --out "$tmp/out.npy" 2>"$tmp/err" &&
  "$HELPER" zeros "$B/expect0.npy" "<i4" 4194304 0 16 && cmp -s "$tmp/out.npy" "$B/expect0.npy"; then
  pass
else
  fail "a prefill with no rows: $(cat "$tmp/err")"
fi
rm -f "$tmp/out.npy"

# What the command prints must reach standard output: a full device or a
# closed descriptor is exit 1 with a message (both used to exit 0).
for cmd in "--version" "--help" "topk --help" "encode --help"; do
  if [ -w /dev/full ]; then
    m3idx_run $cmd >/dev/full 2>"$tmp/err"
    rc=$?
    [ $rc -eq 1 ] && grep -q "cannot write to standard output" "$tmp/err" && pass ||
      fail "$cmd >/dev/full: exit $rc, $(cat "$tmp/err")"
  fi
  m3idx_run $cmd >&- 2>"$tmp/err"
  rc=$?
  [ $rc -eq 1 ] && grep -q "cannot write to standard output" "$tmp/err" && pass ||
    fail "$cmd with standard output closed: exit $rc, $(cat "$tmp/err")"
done

m3idx_run --version | grep -q "^m3idx [0-9]" && pass || fail "--version"
m3idx_run topk --help | grep -q "usage: m3idx topk" && pass || fail "topk --help"

echo "check-cli: $checks checks, $failures failures"
[ "$failures" -eq 0 ]
