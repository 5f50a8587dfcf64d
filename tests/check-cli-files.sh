#!/bin/sh
# check-cli-files.sh - the m3idx command never destroys or mislabels a file:
# outputs appear together or not at all, an existing file survives a failed
# run, two names of one file are refused, devices, FIFOs and symbolic links
# are written through, modes are kept, read-only files need --force, a
# signal leaves no temporary behind, inputs must be regular files, and bad
# input is refused before anything is sized from it.
# With M3IDX_WRAP set (CI: valgrind), every run goes through it.
set -u
: "${M3IDX:=../cli/m3idx}"
: "${HELPER:=./cli-helper}"
# shellcheck disable=SC2086 # M3IDX_WRAP is a command line
m3idx_run() { ${M3IDX_WRAP:-} "$M3IDX" "$@"; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/m3idx-files.XXXXXX") || exit 99
holder=
trap '[ -n "$holder" ] && kill $holder 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM
failures=0
checks=0
pass() { checks=$((checks + 1)); }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL: $*"; }
# Sanitizers and valgrind reserve address space: no ulimit -v under them.
case "${CFLAGS:-} ${M3IDX_WRAP:-}" in
*sanitize* | *valgrind*) limited=no ;;
*) limited=yes ;;
esac

D=$tmp/dec
mkdir -p "$D" "$tmp/o"
"$HELPER" gen "$D" decode 4242 || exit 99
P=$tmp/pre
mkdir -p "$P"
"$HELPER" gen "$P" prefill 4243 || exit 99
# shellcheck disable=SC2046
topk() { m3idx_run topk $(cat "$D/args") --query "$D/query.npy" --pages "$D/pages.npy" \
  --block-table "$D/block_table.npy" --seq-lens "$D/seq_lens.npy" "$@"; }
no_temps() { ! ls -A "$1" | grep -q '^\.m3idx-'; }
O=$tmp/o

# 1. A failing --scores-out leaves an existing --out as it was.
printf OLD >"$O/keep.npy"
if topk --out "$O/keep.npy" --scores-out "$O/no/such/dir/s.npy" 2>"$tmp/err"; then
  fail "1: --scores-out into a missing folder: exit 0"
elif [ "$(cat "$O/keep.npy" 2>/dev/null)" != OLD ]; then
  fail "1: the existing --out was removed or changed"
else
  pass
fi
# ... and --out naming an input is refused; the input stays.
cp "$D/seq_lens.npy" "$O/sl.npy"
if m3idx_run topk $(cat "$D/args") --query "$D/query.npy" --pages "$D/pages.npy" \
  --block-table "$D/block_table.npy" --seq-lens "$O/sl.npy" --out "$O/sl.npy" 2>"$tmp/err"; then
  fail "1: --out naming --seq-lens: exit 0"
elif ! cmp -s "$O/sl.npy" "$D/seq_lens.npy" || ! grep -q "same file as --seq-lens" "$tmp/err"; then
  fail "1: --out naming --seq-lens: $(cat "$tmp/err")"
else
  pass
fi

# 2. One file in two spellings, through a symlink, a hard link or '..'.
same() { # same NAME OUT SCORES
  rm -f "$O/two.npy"
  if topk --out "$2" --scores-out "$3" 2>"$tmp/err"; then
    fail "2: $1: exit 0"
  elif ! grep -q "name the same file" "$tmp/err"; then
    fail "2: $1: $(cat "$tmp/err")"
  else
    pass
  fi
}
same "./ spelling" "$O/two.npy" "$O/./two.npy"
mkdir -p "$O/sub"
same "'..' spelling" "$O/two.npy" "$O/sub/../two.npy"
printf X >"$O/t.npy"
ln -sf t.npy "$O/t-link.npy"
same "a symbolic link" "$O/t.npy" "$O/t-link.npy"
ln -f "$O/t.npy" "$O/t-hard.npy"
same "a hard link" "$O/t.npy" "$O/t-hard.npy"
cp "$D/query.npy" "$O/q.npy"
ln -f "$O/q.npy" "$O/q-hard.npy"
if m3idx_run topk $(cat "$D/args") --query "$O/q.npy" --pages "$D/pages.npy" \
  --block-table "$D/block_table.npy" --seq-lens "$D/seq_lens.npy" --out "$O/q-hard.npy" 2>"$tmp/err" ||
  ! cmp -s "$O/q.npy" "$D/query.npy"; then
  fail "2: --out a hard link of --query: $(cat "$tmp/err")"
else
  pass
fi

# 3. Devices and FIFOs are written through, never replaced.
if [ "$(id -u)" = 0 ] && mknod "$O/null" c 1 3 2>/dev/null; then
  if topk --out "$O/null" 2>"$tmp/err" && [ -c "$O/null" ]; then
    pass
  else
    fail "3: --out a character device: $(cat "$tmp/err"); $(ls -l "$O/null")"
  fi
fi
mkfifo "$O/fifo"
cat "$O/fifo" >"$O/from-fifo" &
reader=$!
if topk --out "$O/fifo" 2>"$tmp/err" && [ -p "$O/fifo" ]; then
  wait $reader
  cmp -s "$O/from-fifo" "$D/expected_topk.npy" && pass || fail "3: the bytes through the FIFO differ"
else
  fail "3: --out a FIFO: $(cat "$tmp/err"); $(ls -l "$O/fifo")"
  kill $reader 2>/dev/null
fi
rm -f "$O/fifo"
# A FIFO nobody reads is an error, not a hang.
mkfifo "$O/fifo"
if timeout 20 "$M3IDX" topk $(cat "$D/args") --query "$D/query.npy" --pages "$D/pages.npy" \
  --block-table "$D/block_table.npy" --seq-lens "$D/seq_lens.npy" --out "$O/fifo" 2>"$tmp/err"; then
  fail "3: --out a FIFO without a reader: exit 0"
elif ! grep -q "no process reads the FIFO" "$tmp/err" || [ ! -p "$O/fifo" ]; then
  fail "3: --out a FIFO without a reader: $(cat "$tmp/err")"
else
  pass
fi
rm -f "$O/fifo"

# 4. Thread counts: bounded, and OMP_NUM_THREADS cannot make it crash.
if OMP_NUM_THREADS=100000 topk --out "$O/omp.npy" --backend cpu 2>"$tmp/err" &&
  cmp -s "$O/omp.npy" "$D/expected_topk.npy"; then
  pass
else
  fail "4: OMP_NUM_THREADS=100000: $(cat "$tmp/err")"
fi
if topk --out "$O/t.npy" --threads 5000 --backend cpu 2>"$tmp/err"; then
  fail "4: --threads 5000: exit 0"
else
  grep -q -- "--threads '5000'" "$tmp/err" && pass || fail "4: --threads 5000: $(cat "$tmp/err")"
fi
if [ $limited = yes ]; then
  (ulimit -v 400000 && topk --out "$O/lim.npy" --threads 512 --backend cpu) 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 1 ] && grep -q "worker threads" "$tmp/err" && ! grep -q libgomp "$tmp/err"; then
    pass
  else
    fail "4: 512 threads in 400 MB: exit $rc, $(cat "$tmp/err")"
  fi
fi

# 6. Bad input is refused before scratch is sized from it: 64 rows x 8
# heads with seq_lens near 2^31 and one block-table column once asked for
# 34 GB and reported "no memory".
"$HELPER" zeros "$O/q64.npy" "<u2" 64 8 128
"$HELPER" zeros "$O/bt64.npy" "<i4" 64 1
"$HELPER" fill-i32 "$O/sl64.npy" 2147483000 64
big() { m3idx_run topk --mode decode --query-dtype bf16 --query "$O/q64.npy" --pages "$D/pages.npy" \
  --block-table "$O/bt64.npy" --seq-lens "$O/sl64.npy" --out "$O/big.npy"; }
if [ $limited = yes ]; then (ulimit -v 2000000 && big) 2>"$tmp/err"; else big 2>"$tmp/err"; fi
if grep -q -- "--seq-lens\[0\] is 2147483000: 16777211 blocks, more than the 1 columns" "$tmp/err" &&
  [ ! -e "$O/big.npy" ]; then
  pass
else
  fail "6: seq_lens past the block table: $(cat "$tmp/err")"
fi

# 7. SIGTERM while the outputs are written: no temporary left, and no --out
# without its --scores-out.  The scores (80 KB) go to a FIFO that is held
# open and never read, so the run stops there.
"$HELPER" zeros "$O/q1.npy" "<u2" 1 1 128
"$HELPER" zeros "$O/bt1.npy" "<i4" 1 20000
"$HELPER" fill-i32 "$O/sl1.npy" 2560000 1
mkfifo "$O/held"
(exec 3<>"$O/held"; sleep 60) &
holder=$!
"$M3IDX" topk --mode decode --query-dtype bf16 --query "$O/q1.npy" --pages "$D/pages.npy" \
  --block-table "$O/bt1.npy" --seq-lens "$O/sl1.npy" --out "$O/sig.npy" \
  --scores-out "$O/held" 2>"$tmp/err" &
run=$!
i=0
while [ $i -lt 100 ] && kill -0 $run 2>/dev/null && no_temps "$O"; do
  sleep 0.1
  i=$((i + 1))
done
sleep 0.3
kill -TERM $run 2>/dev/null
wait $run
rc=$?
kill $holder 2>/dev/null
wait $holder 2>/dev/null
holder=
if [ $rc -ne 143 ]; then
  fail "7: the run was not stopped while writing (exit $rc): $(cat "$tmp/err")"
elif ! no_temps "$O" || [ -e "$O/sig.npy" ]; then
  fail "7: after SIGTERM: $(ls -A "$O" | grep -e '^\.m3idx-' -e sig.npy)"
else
  pass
fi
rm -f "$O/held"

# A file-size limit (ulimit -f 0: no byte may be written) used to end the run with
# SIGXFSZ and leave the temporary: now the write fails and the old --out stays.
printf OLD >"$O/fsz.npy"
# The message goes through a pipe: the limit applies to files, stderr's too.
msg=$( (ulimit -f 0 && "$M3IDX" topk $(cat "$D/args") --query "$D/query.npy" --pages "$D/pages.npy" \
  --block-table "$D/block_table.npy" --seq-lens "$D/seq_lens.npy" --out "$O/fsz.npy"; echo "exit $?") 2>&1)
if echo "$msg" | grep -q "File too large" && echo "$msg" | grep -q "^exit 1$" &&
  [ "$(cat "$O/fsz.npy")" = OLD ] && no_temps "$O"; then
  pass
else
  fail "file-size limit: $msg; $(ls -A "$O" | grep '^\.m3idx-')"
fi
rm -f "$O"/.m3idx-*

# 8. seq_lens near 2^31 with --scores-out: valid, so it runs (the score
# width overflowed int32 before).  One request: 16.7M blocks of one page.
if [ $limited = yes ]; then
  "$HELPER" zeros "$O/btw.npy" "<i4" 1 16777216
  "$HELPER" fill-i32 "$O/slw.npy" 2147483647 1
  if m3idx_run topk --mode decode --query-dtype bf16 --query "$O/q1.npy" --pages "$D/pages.npy" \
    --block-table "$O/btw.npy" --seq-lens "$O/slw.npy" --out "$O/w.npy" \
    --scores-out "$O/ws.npy" 2>"$tmp/err" && [ "$(wc -c <"$O/ws.npy")" -eq $((128 + 4 * 16777216)) ]; then
    pass
  else
    fail "8: seq_lens 2147483647 with --scores-out: $(cat "$tmp/err")"
  fi
  rm -f "$O/btw.npy" "$O/ws.npy"
fi

# 12. Symbolic links are written through; modes are kept; read-only files
# need --force.
topk --out "$O/real.npy" 2>/dev/null
printf OLD >"$O/real.npy"
ln -sf real.npy "$O/link.npy"
if topk --out "$O/link.npy" 2>"$tmp/err" && [ -L "$O/link.npy" ] &&
  cmp -s "$O/real.npy" "$D/expected_topk.npy"; then
  pass
else
  fail "12: --out a symbolic link: $(cat "$tmp/err"); $(ls -l "$O/link.npy")"
fi
printf OLD >"$O/private.npy"
chmod 600 "$O/private.npy"
topk --out "$O/private.npy" 2>"$tmp/err"
mode=$(stat -c %a "$O/private.npy")
[ "$mode" = 600 ] && pass || fail "12: mode 600 became $mode"
printf OLD >"$O/ro.npy"
chmod 444 "$O/ro.npy"
if topk --out "$O/ro.npy" 2>"$tmp/err"; then
  fail "12: a read-only --out was replaced without --force"
elif [ "$(cat "$O/ro.npy")" != OLD ] || ! grep -q "read-only" "$tmp/err"; then
  fail "12: read-only --out: $(cat "$tmp/err")"
else
  pass
fi
if topk --out "$O/ro.npy" --force 2>"$tmp/err" && cmp -s "$O/ro.npy" "$D/expected_topk.npy" &&
  [ "$(stat -c %a "$O/ro.npy")" = 444 ]; then
  pass
else
  fail "12: --force on a read-only --out: $(cat "$tmp/err")"
fi
ln -sf missing.npy "$O/dangling.npy"
if topk --out "$O/dangling.npy" 2>"$tmp/err"; then
  fail "12: --out a dangling symbolic link: exit 0"
else
  grep -q "symbolic link to a missing file" "$tmp/err" && pass || fail "12: dangling: $(cat "$tmp/err")"
fi

# 12b. Outputs refused before anything is read are bad usage, exit 2
# (m3idx(1)): a missing folder, a directory, a symbolic-link loop (whose
# message once read "is a symbolic link to Too many levels of ...").
ln -sf loop-b.npy "$O/loop-a.npy"
ln -sf loop-a.npy "$O/loop-b.npy"
mkdir -p "$O/a-dir"
for bad in "$O/no/such/folder/x.npy:No such file or directory" "$O/a-dir:is a directory" \
    "$O/loop-a.npy:is a symbolic link that leads back to itself (a loop)"; do
  path=${bad%%:*} text=${bad#*:}
  topk --out "$path" 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 2 ] && grep -q -F -- "$text" "$tmp/err"; then
    pass
  else
    fail "12b: --out $path: exit $rc, $(cat "$tmp/err")"
  fi
done
rm -f "$O/loop-a.npy" "$O/loop-b.npy"
rmdir "$O/a-dir"

# 13. Output names of 250 bytes.
long=$(printf 'n%.0s' $(seq 1 246)).npy
if topk --out "$O/$long" 2>"$tmp/err" && cmp -s "$O/$long" "$D/expected_topk.npy"; then
  pass
else
  fail "13: a 250-byte --out name: $(cat "$tmp/err")"
fi

# 14. Inputs must be regular files: a FIFO with no writer used to block.
mkfifo "$O/in-fifo"
if timeout 20 "$M3IDX" topk $(cat "$D/args") --query "$O/in-fifo" --pages "$D/pages.npy" \
  --block-table "$D/block_table.npy" --seq-lens "$D/seq_lens.npy" --out "$O/x.npy" 2>"$tmp/err"; then
  fail "14: --query a FIFO: exit 0"
elif ! grep -q -- "--query: '.*in-fifo' is not a regular file" "$tmp/err"; then
  fail "14: --query a FIFO: $(cat "$tmp/err")"
else
  pass
fi
rm -f "$O/in-fifo"

# Options that name output files are not abbreviated: --score (meant as
# --scale) once wrote the scores to a file named 0.5.
if (cd "$O" && topk --out "$O/ab.npy" --score 0.5) 2>"$tmp/err"; then
  fail "abbreviation: --score 0.5 ran"
elif [ -e "$O/0.5" ] || ! grep -q "must be written in full (--scores-out)" "$tmp/err"; then
  fail "abbreviation: $(cat "$tmp/err")"
else
  pass
fi
# Library messages name the options, not C fields.
cp "$P/context_lens.npy" "$O/cl.npy"
"$HELPER" set-i32 "$O/cl.npy" 0 0
# shellcheck disable=SC2046
m3idx_run topk $(cat "$P/args") --query "$P/query.npy" --pages "$P/pages.npy" \
  --block-table "$P/block_table.npy" --seq-lens "$P/seq_lens.npy" --cu-seqlens-q "$P/cu_seqlens_q.npy" \
  --context-lens "$O/cl.npy" --out "$O/cl-out.npy" 2>"$tmp/err"
if grep -q -- "--context-lens" "$tmp/err" && ! grep -q -e context_lens -e cu_seqlens_q -e seq_lens "$tmp/err"; then
  pass
else
  fail "messages: $(cat "$tmp/err")"
fi

# encode: the same rules.
"$HELPER" keys "$O/keys.npy" 200 5
if m3idx_run encode --keys "$O/keys.npy" --out "$O/keys.npy" 2>"$tmp/err"; then
  fail "encode --out naming --keys: exit 0"
else
  grep -q "same file as --keys" "$tmp/err" && pass || fail "encode: $(cat "$tmp/err")"
fi
if m3idx_run encode --keys "$O/keys.npy" --ou "$O/p.npy" 2>"$tmp/err"; then
  fail "encode --ou: exit 0"
else
  pass
fi

no_temps "$O" && pass || fail "temporaries left: $(ls -A "$O" | grep '^\.m3idx-')"
echo "check-cli-files: $checks checks, $failures failures"
[ "$failures" -eq 0 ]
