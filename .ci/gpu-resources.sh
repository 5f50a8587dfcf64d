#!/bin/bash
# gpu-resources.sh BUILD_DIR HOT_KERNELS... - the AMD code objects of a
# clang-built plugin: a resource table per kernel and target (VGPRs, AGPRs,
# SGPRs, spills, scratch, LDS, waves per SIMD), and a failure when any
# kernel flushes fp32 denormals or leaves IEEE mode, spills VGPRs, when a
# hot kernel uses scratch (unless listed in ALLOW_SCRATCH, with its
# reason), or when the plugin's flags contract a*b+c or take fast math
# (the fp canary).  Needs llvm-objcopy, clang-offload-bundler, llvm-readelf
# and llvm-objdump of the same LLVM (LLVM_SUFFIX, default -22).
set -euo pipefail
build=$1
shift
hot=" $* "
sfx=${LLVM_SUFFIX:--22}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
seen=""
printf '%-8s %-34s %5s %5s %5s %6s %6s %8s %6s %5s %7s %4s\n' target kernel vgpr agpr sgpr vspill sspill scratch lds waves denorm32 ieee
for obj in "$build"/lib-gpu/.libs/*.o; do
  llvm-objcopy$sfx --dump-section=.hip_fatbin="$tmp/fat" "$obj" 2>/dev/null || continue
  for target in $(clang-offload-bundler$sfx --list --type=o --input="$tmp/fat" | grep amdgcn); do
    arch=${target##*--}
    clang-offload-bundler$sfx --unbundle --type=o --input="$tmp/fat" --targets="$target" --output="$tmp/co"
    llvm-readelf$sfx --notes "$tmp/co" >"$tmp/notes"
    llvm-objdump$sfx -D --section=.rodata "$tmp/co" >"$tmp/kd" 2>/dev/null || true
    # One line per kernel from the metadata, then its descriptor's float modes.
    awk -v arch="$arch" -v hot="$hot" -v allow=" ${ALLOW_SCRATCH:-} " '
      function flush() {
        if (name == "") return
        lds_cu = (arch == "gfx950") ? 163840 : 65536
        granule = 8
        regs = int((vgpr + agpr + granule - 1) / granule) * granule
        waves = regs > 0 ? int(512 / regs) : 8
        if (waves > 8) waves = 8
        wpb = int((wgs + 63) / 64)
        if (lds > 0 && wpb > 0) {
          blocks = int(lds_cu / lds)
          lw = int(blocks * wpb / 4)
          if (lw < waves) waves = lw
        }
        printf "%s|%s|%d|%d|%d|%d|%d|%d|%d|%d\n", arch, name, vgpr, agpr, sgpr, vspill, sspill, scratch, lds, waves
        name = ""
      }
      /^ *- \.agpr_count:/ { flush(); agpr = $NF }
      /\.agpr_count:/ { agpr = $NF }
      /\.name:/ { name = $NF }
      /\.vgpr_count:/ { vgpr = $NF }
      /\.sgpr_count:/ { sgpr = $NF }
      /\.vgpr_spill_count:/ { vspill = $NF }
      /\.sgpr_spill_count:/ { sspill = $NF }
      /\.private_segment_fixed_size:/ { scratch = $NF }
      /\.group_segment_fixed_size:/ { lds = $NF }
      /\.max_flat_workgroup_size:/ { wgs = $NF }
      END { flush() }' "$tmp/notes" >"$tmp/rows"
    while IFS='|' read -r a name vgpr agpr sgpr vspill sspill scratch lds waves; do
      modes=$(awk -v k="$name" '$0 ~ "^.amdhsa_kernel "k"$" {on=1} on && /amdhsa_float_denorm_mode_32/ {d=$2} on && /amdhsa_ieee_mode/ {i=$2} on && /end_amdhsa_kernel/ {print d, i; exit}' "$tmp/kd")
      denorm=${modes% *}
      ieee=${modes#* }
      # The kernel's name from its mangled one (_Z<length><name>...), and
      # a template's integer argument: score_decode_fp64<1> is its path 1.
      rest=${name#_Z}
      len=${rest%%[!0-9]*}
      base=$name
      if [ -n "$len" ] && [ "$rest" != "$name" ]; then
        rest=${rest#"$len"}
        base=${rest:0:$len}
        rest=${rest:$len}
      fi
      short=$base
      case $rest in ILi*) arg=${rest#ILi}; short="$base<${arg%%E*}>" ;; esac
      short=$(echo "$short" | cut -c1-34)
      printf '%-8s %-34s %5s %5s %5s %6s %6s %8s %6s %5s %7s %4s\n' "$a" "$short" "$vgpr" "$agpr" "$sgpr" "$vspill" "$sspill" "$scratch" "$lds" "$waves" "$denorm" "$ieee"
      if [ "$denorm" != 3 ] || [ "$ieee" != 1 ]; then
        echo "FAIL: $a $short: fp32 denormals flushed or IEEE mode off (denorm_mode_32 $denorm, ieee_mode $ieee)"
        fail=1
      fi
      if [ "$vspill" != 0 ]; then
        echo "FAIL: $a $short spills $vspill VGPRs"
        fail=1
      fi
      case $hot in *" $base "*)
        if [ "$scratch" != 0 ]; then
          case " ${ALLOW_SCRATCH:-} " in
          *" $base "*) echo "note: $a $short uses $scratch bytes of scratch a lane (allowed: ${ALLOW_SCRATCH_WHY:-no reason given})" ;;
          *) echo "FAIL: $a hot kernel $short uses $scratch bytes of scratch a lane"; fail=1 ;;
          esac
        fi ;;
      esac
      seen="$seen $a:$base"
    done <"$tmp/rows"
  done
done
# Every hot kernel must have been found for every target seen: a build
# that produced no code objects (or renamed a kernel) checks nothing.
targets=$(echo "$seen" | tr ' ' '\n' | sed -n 's/:.*//p' | sort -u)
if [ -z "$targets" ]; then
  echo "FAIL: no AMD code objects under $build/lib-gpu/.libs"
  fail=1
fi
for t in $targets; do
  for k in $hot; do
    case " $seen " in *" $t:$k "*) ;; *) echo "FAIL: $t: hot kernel $k not found"; fail=1 ;; esac
  done
done
# The canary: compiled with the plugin's own flags.
flags=$(sed -n 's/^HIP_CXXFLAGS = //p' "$build/lib-gpu/Makefile")
cc=$(sed -n 's/^HIPCC = //p' "$build/lib-gpu/Makefile")
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck disable=SC2086 # flags is a command line
$cc $flags -c "$here/fp-canary.hip" -o "$tmp/canary.o"
llvm-objcopy$sfx --dump-section=.hip_fatbin="$tmp/cfat" "$tmp/canary.o"
for target in $(clang-offload-bundler$sfx --list --type=o --input="$tmp/cfat" | grep amdgcn); do
  clang-offload-bundler$sfx --unbundle --type=o --input="$tmp/cfat" --targets="$target" --output="$tmp/cco"
  llvm-objdump$sfx -d "$tmp/cco" >"$tmp/cdis"
  mad=$(awk '/<m3idx_canary_mad>:/ {on=1; next} /^$/ {on=0} on' "$tmp/cdis" |
    grep -oE 'v_(fma|fmac|mad|mac|pk_fma)[a-z_0-9]*' | sort -u | tr '\n' ' ' || true)
  div=$(awk '/<m3idx_canary_div>:/ {on=1; next} /^$/ {on=0} on' "$tmp/cdis" | grep -c 'v_div_fixup_f32' || true)
  if [ -n "$mad" ]; then
    echo "FAIL: ${target##*--}: the plugin's flags contract a*b+c ($mad)"
    fail=1
  fi
  if [ "$div" = 0 ]; then
    echo "FAIL: ${target##*--}: the plugin's flags make x/y fast math (no v_div_fixup_f32)"
    fail=1
  fi
done
[ $fail = 0 ] && echo "gpu-resources: every kernel keeps fp32 denormals and IEEE mode, no VGPR spills, no contraction or fast math"
exit $fail
