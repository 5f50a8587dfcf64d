#!/bin/sh
# check-mpi.sh - m3idx-mpi topk writes the bytes of m3idx topk on 1, 2 and
# 3 ranks, each split (auto, rows, blocks), on decode with rows long enough
# to be block-split (4 rows a request, forced blocks) and ragged prefill
# (a request of no rows, requests cut at ranks' edges), and on the tests'
# smaller cases, with the inputs sent by rank 0 or read by every rank;
# both equal the oracle's expected top-k.  m3idx-mpi verify prints what
# m3idx verify prints.  Bad input is
# refused on every rank with exit 2 and nothing written; the library's
# failures (check-mpi-failure) reach every rank.  Exits 77 when configure
# built no MPI.
set -u
: "${HELPER:?}" "${M3IDX:?}"
if [ "${HAVE_MPI:-no}" != yes ]; then
  echo "SKIP: configured without MPI (no mpi-c, ompi-c or mpich for pkg-config; Debian: libopenmpi-dev openmpi-bin)"
  exit 77
fi
if [ -z "${MPIEXEC:-}" ]; then
  echo "FAIL: MPI was configured, but configure found no mpiexec or mpirun to run the ranks"
  exit 1
fi
MPI_M3IDX=${M3IDX%/m3idx}/m3idx-mpi
# Under AddressSanitizer, LeakSanitizer reports Open MPI's own allocations
# at MPI_Finalize, from components it has unloaded by then (no suppression
# can name them): leaks are not checked here; every other error is.
case "${CFLAGS:-}" in
*-fsanitize=*address*) export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" ;;
esac
tmp=$(mktemp -d "${TMPDIR:-/tmp}/m3idx-mpi.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
failures=0 checks=0
pass() { checks=$((checks + 1)); }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL: $*"; }

# Open MPI refuses root and more ranks than cores unless told.
run_flags=
if "$MPIEXEC" --version 2>&1 | grep -Eq "Open MPI|OpenRTE"; then
  run_flags="--oversubscribe"
  [ "$(id -u)" = 0 ] && run_flags="$run_flags --allow-run-as-root"
fi
mpi() { n=$1; shift; timeout 300 "$MPIEXEC" $run_flags -n "$n" "$@"; }

inputs() {
  d=$1
  set -- $(cat "$d/args") --query "$d/query.npy" --pages "$d/pages.npy" \
    --block-table "$d/block_table.npy" --seq-lens "$d/seq_lens.npy"
  [ -f "$d/cu_seqlens_q.npy" ] &&
    set -- "$@" --cu-seqlens-q "$d/cu_seqlens_q.npy" --context-lens "$d/context_lens.npy"
  echo "$@"
}

for c in long-decode:12 long-decode:14 long-prefill:21 long-prefill:24 decode:5 prefill:6 special:7; do
  kind=${c%:*} seed=${c#*:} d=$tmp/$kind-$seed
  mkdir -p "$d"
  "$HELPER" gen "$d" "$kind" "$seed" || { fail "cli-helper gen $kind $seed"; continue; }
  args=$(inputs "$d")
  "$M3IDX" topk $args --backend cpu --out "$d/one.npy" --scores-out "$d/one-s.npy" ||
    { fail "$kind $seed: m3idx topk"; continue; }
  cmp -s "$d/one.npy" "$d/expected_topk.npy" && pass || fail "$kind $seed: m3idx topk is not the oracle's"
  for n in 1 2 3; do
    for split in auto rows blocks; do
      o=$d/m$n$split
      if ! mpi "$n" "$MPI_M3IDX" topk $args --backend cpu --threads 1 --split "$split" \
          --out "$o.npy" --scores-out "$o-s.npy" > "$o.log" 2>&1; then
        fail "$kind $seed, $n ranks, --split $split: exit $?: $(head -3 "$o.log")"
        continue
      fi
      cmp -s "$d/one.npy" "$o.npy" && cmp -s "$d/one-s.npy" "$o-s.npy" && pass ||
        fail "$kind $seed, $n ranks, --split $split: not the bytes of m3idx topk"
    done
  done
  # Every rank reading the inputs itself (as from a shared file system).
  for split in auto blocks; do
    o=$d/e3$split
    if ! mpi 3 "$MPI_M3IDX" topk $args --backend cpu --threads 1 --split "$split" \
        --inputs every-rank --out "$o.npy" --scores-out "$o-s.npy" > "$o.log" 2>&1; then
      fail "$kind $seed, --inputs every-rank --split $split: exit $?: $(head -3 "$o.log")"
      continue
    fi
    cmp -s "$d/one.npy" "$o.npy" && cmp -s "$d/one-s.npy" "$o-s.npy" && pass ||
      fail "$kind $seed, --inputs every-rank --split $split: not the bytes of m3idx topk"
  done
done

# m3idx-mpi verify prints what m3idx verify prints, with its exit code: the
# exact candidate with its scores, and one with a duplicate id (--json).
for c in long-decode-12 long-prefill-21 prefill-6; do
  d=$tmp/$c
  args=$(inputs "$d")
  cp "$d/expected_topk.npy" "$d/bad.npy"
  "$HELPER" set-i32 "$d/bad.npy" 3 0
  for v in "--candidate $d/expected_topk.npy --candidate-scores $d/expected_scores.npy" \
           "--candidate $d/bad.npy --json"; do
    "$M3IDX" verify $args $v --backend cpu > "$d/v-one.txt" 2>&1
    want=$?
    for n in 1 3; do
      for inputs in root every-rank; do
        mpi "$n" "$MPI_M3IDX" verify $args $v --backend cpu --threads 1 --inputs "$inputs" \
          > "$d/v-mpi.txt" 2>/dev/null
        got=$?
        [ "$got" = "$want" ] && cmp -s "$d/v-one.txt" "$d/v-mpi.txt" && pass ||
          fail "$c verify $v, $n ranks, --inputs $inputs: exit $got (want $want), $(diff "$d/v-one.txt" "$d/v-mpi.txt" | head -3)"
      done
    done
  done
done
grep -q "1 wrong" "$tmp/long-decode-12/v-one.txt" 2>/dev/null || grep -q '"wrong": 1' "$tmp/long-decode-12/v-one.txt" && pass ||
  fail "the damaged candidate was not found wrong: $(cat "$tmp/long-decode-12/v-one.txt")"

# Bad input: a page id past the pages, on every rank exit 2, nothing written.
d=$tmp/long-decode-12
"$HELPER" set-i32 "$d/block_table.npy" 3 100000
args=$(inputs "$d")
mpi 3 "$MPI_M3IDX" topk $args --out "$tmp/bad.npy" > "$tmp/bad.log" 2>&1
rc=$?
[ "$rc" = 2 ] && pass || fail "bad page id: exit $rc, not 2"
[ ! -e "$tmp/bad.npy" ] && pass || fail "bad page id: an output was written"
grep -q "m3idx-mpi topk: .*block-table" "$tmp/bad.log" && pass ||
  fail "bad page id: the message does not name the block table: $(cat "$tmp/bad.log")"
[ "$(grep -c "m3idx-mpi topk" "$tmp/bad.log")" = 1 ] && pass ||
  fail "bad page id: not one message: $(cat "$tmp/bad.log")"
mpi 2 "$MPI_M3IDX" topk --split sideways $args --out "$tmp/bad.npy" > "$tmp/split.log" 2>&1
rc=$?
[ "$rc" = 2 ] && grep -q "split is 'sideways'" "$tmp/split.log" && pass ||
  fail "--split sideways: exit $rc: $(cat "$tmp/split.log")"

# The library's own failures reach every rank.
if mpi 3 ./check-mpi-failure > "$tmp/fail.log" 2>&1; then pass; else
  fail "check-mpi-failure (exit $?):"; cat "$tmp/fail.log"
fi
grep "check-mpi-failure" "$tmp/fail.log"

echo "check-mpi: $checks checks, $failures failures"
[ "$failures" -eq 0 ]
