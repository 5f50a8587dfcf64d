# M3IDX_CHECK_HIP
# ---------------
# Probe the HIP toolchain for the GPU backend plugin (lib-gpu).
#   --with-hip[=DIR]         DIR: ROCm (amd) or CUDA (nvidia) prefix; default: guess
#   --with-hip-platform=P    amd (hipcc, default) or nvidia (nvcc + lib-gpu/hip-on-cuda.h)
#   --with-hip-arch=LIST     comma-separated targets; default gfx950 (amd) or sm_90 (nvidia)
#   --with-hip-clang=CLANG   amd: compile with this clang (clang-22 knows gfx950) instead of
#                            hipcc, against the HIP headers and device bitcode under the
#                            --with-hip DIR (given with -isystem, so that no other HIP header
#                            tree is read: configure checks it)
#   --with-rocm-device-libs=DIR  that clang's device bitcode (default: found under DIR)
# Asked for explicitly and not usable: configure stops.  Only guessed: a
# warning, and the library is built CPU-only.
# Sets HIPCC, HIP_PLATFORM, HIP_ARCHS, HIP_CXXFLAGS, HIP_LIBS, HIP_HEADERS (the
# headers' tree and HIP version, for the summary), have_hip, hip_why and the
# HAVE_HIP conditional (always defined, outside every `if').
AC_DEFUN([M3IDX_CHECK_HIP], [
AC_ARG_WITH([hip],
  [AS_HELP_STRING([--with-hip@<:@=DIR@:>@],
    [build the HIP backend plugin, DIR the ROCm or CUDA prefix @<:@default=guess@:>@])],
  [], [with_hip=guess])
AC_ARG_WITH([hip-platform],
  [AS_HELP_STRING([--with-hip-platform=amd|nvidia],
    [GPU platform of the HIP backend @<:@default=amd@:>@])],
  [], [with_hip_platform=amd])
AC_ARG_WITH([hip-arch],
  [AS_HELP_STRING([--with-hip-arch=LIST],
    [comma-separated GPU targets @<:@default=gfx950 for amd, sm_90 for nvidia@:>@])],
  [hip_arch_given=yes], [with_hip_arch=; hip_arch_given=no])
AC_ARG_WITH([hip-clang],
  [AS_HELP_STRING([--with-hip-clang=CLANG],
    [amd: compile the plugin with CLANG (e.g. clang-22) against the HIP headers and bitcode of --with-hip=DIR])],
  [], [with_hip_clang=no])
AC_ARG_WITH([rocm-device-libs],
  [AS_HELP_STRING([--with-rocm-device-libs=DIR],
    [the device bitcode (ocml.bc, ...) for --with-hip-clang @<:@default: found under the --with-hip DIR@:>@])],
  [], [with_rocm_device_libs=])

have_hip=no
hip_why=
HIPCC=
HIP_PLATFORM=$with_hip_platform
HIP_ARCHS=
HIP_CXXFLAGS=
HIP_LIBS=
HIP_HEADERS=
hip_clang=no

AS_CASE([$with_hip_platform],
  [amd|nvidia], [],
  [AC_MSG_ERROR([--with-hip-platform must be amd or nvidia, not '$with_hip_platform'])])

AS_IF([test "x$with_hip" = xno], [hip_why="disabled by --without-hip"], [
  hip_prefix=
  AS_CASE([$with_hip], [yes|guess], [], [hip_prefix=$with_hip])
  AS_IF([test "x$with_hip_platform" = xamd && test "x$with_hip_clang" != xno], [
    hip_clang=yes
    AS_IF([test -n "$hip_prefix" && test -d "$hip_prefix"], [hip_prefix=`cd "$hip_prefix" && pwd`])
    AS_IF([test -z "$hip_prefix"],
      [AC_MSG_ERROR([--with-hip-clang needs --with-hip=DIR, the tree of the HIP headers (DIR/include/hip) and libamdhip64])])
    AS_IF([test ! -f "$hip_prefix/include/hip/hip_runtime.h"],
      [AC_MSG_ERROR([--with-hip=$hip_prefix has no include/hip/hip_runtime.h])])
    AC_PATH_PROG([HIPCC], [$with_hip_clang])
    AS_IF([test -z "$HIPCC"], [AC_MSG_ERROR([--with-hip-clang=$with_hip_clang: not found])])
    hip_bitcode=$with_rocm_device_libs
    AS_IF([test -z "$hip_bitcode"],
      [hip_bitcode=`find "$hip_prefix" -name ocml.bc 2>/dev/null | head -1`
       hip_bitcode=${hip_bitcode%/ocml.bc}])
    AS_IF([test -z "$hip_bitcode" || test ! -f "$hip_bitcode/ocml.bc"],
      [AC_MSG_ERROR([no device bitcode (ocml.bc) under $hip_prefix; give --with-rocm-device-libs=DIR])])
    AS_IF([test -z "$with_hip_arch"], [with_hip_arch=gfx950])
  ], [test "x$with_hip_platform" = xamd], [
    AS_IF([test -n "$hip_prefix"],
      [AC_PATH_PROG([HIPCC], [hipcc], [], [$hip_prefix/bin])],
      [AC_PATH_PROG([HIPCC], [hipcc], [], [$PATH:/opt/rocm/bin])])
    AS_IF([test -z "$with_hip_arch"], [with_hip_arch=gfx950])
  ], [
    AS_IF([test -n "$hip_prefix"],
      [AC_PATH_PROG([HIPCC], [nvcc], [], [$hip_prefix/bin])],
      [AC_PATH_PROG([HIPCC], [nvcc], [], [$PATH:/usr/local/cuda/bin])])
    AS_IF([test -z "$with_hip_arch"], [with_hip_arch=sm_90])
  ])
  AS_IF([test -z "$HIPCC"],
    [AS_IF([test "x$with_hip_platform" = xamd],
       [hip_why="hipcc not found"], [hip_why="nvcc not found"])])

  AS_IF([test -n "$HIPCC"], [
    hip_bindir=`dirname "$HIPCC"`
    hip_root=`dirname "$hip_bindir"`
    cat > conftest.hip <<'HIPEOF'
#if defined(M3IDX_HIP_PLATFORM_NVIDIA)
#include <cuda_runtime.h>
#else
#include <hip/hip_runtime.h>
#endif
__global__ void m3idx_conftest(float *x) { *(x + threadIdx.x) = fmaf(*x, 2.0f, 1.0f); }
HIPEOF
    HIP_ARCHS=`echo "$with_hip_arch" | tr ',' ' '`
    hip_arch_flags=
    # clang: the chosen tree first (-isystem), its bitcode, and the flags
    # that keep SPEC's bits (no contraction, no fast math, denormals kept).
    hip_clang_flags=
    AS_IF([test "x$hip_clang" = xyes],
      [hip_clang_flags="-x hip --rocm-path=$hip_prefix --rocm-device-lib-path=$hip_bitcode -isystem $hip_prefix/include"
       # ROCm 6's headers read __AMDGCN_WAVEFRONT_SIZE, which clang 22 no
       # longer defines; every AMD target m3idx builds (gfx90a, gfx942, gfx950) is wave64.
       hip_major=`sed -n 's/^#define HIP_VERSION_MAJOR *//p' "$hip_prefix/include/hip/hip_version.h" 2>/dev/null`
       AS_IF([test -n "$hip_major" && test "$hip_major" -lt 7],
         [hip_clang_flags="$hip_clang_flags -D__AMDGCN_WAVEFRONT_SIZE=64"])])
    for hip_arch in $HIP_ARCHS; do
      AS_IF([test "x$with_hip_platform" = xamd],
        [hip_one="--offload-arch=$hip_arch"],
        [hip_cc=`echo "$hip_arch" | sed 's/^sm_//'`
         hip_one="-gencode=arch=compute_$hip_cc,code=sm_$hip_cc"])
      AC_MSG_CHECKING([whether $HIPCC compiles for $hip_arch])
      AS_IF([test "x$hip_clang" = xyes],
        [hip_cmd="$HIPCC $hip_clang_flags -c $hip_one -MD -MF conftest.d -o conftest.o conftest.hip"],
        [test "x$with_hip_platform" = xamd],
        [hip_cmd="$HIPCC -c $hip_one -o conftest.o conftest.hip"],
        [hip_cmd="$HIPCC -c -x cu -DM3IDX_HIP_PLATFORM_NVIDIA $hip_one -o conftest.o conftest.hip"])
      AS_IF([$hip_cmd >&AS_MESSAGE_LOG_FD 2>&1],
        [AC_MSG_RESULT([yes]); hip_arch_flags="$hip_arch_flags $hip_one"],
        [AC_MSG_RESULT([no]); hip_why="$HIPCC cannot compile for $hip_arch"; break])
      # Mixed trees: every HIP header read must come from the chosen one.
      AS_IF([test "x$hip_clang" = xyes && test -z "$hip_why"], [
        hip_stray=`tr -s ' ' '\n' < conftest.d | grep '/hip/' | grep -v "^$hip_prefix/include/" | head -3 | tr '\n' ' '`
        AS_IF([test -n "$hip_stray"],
          [AC_MSG_ERROR([$HIPCC read HIP headers from outside $hip_prefix/include: $hip_stray])])])
    done
    rm -f conftest.hip conftest.o conftest.d
    AS_IF([test -z "$hip_why"], [
      HIP_ARCHS=$with_hip_arch
      AS_IF([test "x$with_hip_platform" = xamd], [
        HIP_CXXFLAGS="$hip_clang_flags -O3 -fPIC -std=c++17 -fvisibility=hidden -ffp-contract=off -fno-fast-math -fno-gpu-flush-denormals-to-zero $hip_arch_flags"
        AS_IF([test "x$hip_clang" = xyes], [hip_root=$hip_prefix])
        hip_libdir=
        for d in "$hip_root/lib" "$hip_root/hip/lib" "$hip_root/lib/x86_64-linux-gnu" "$hip_root/lib64"; do
          AS_IF([test -e "$d/libamdhip64.so"], [hip_libdir=$d; break])
        done
        HIP_LIBS="${hip_libdir:+-L$hip_libdir }-lamdhip64"
        hip_version_h=
        for d in "$hip_root/include" /usr/include /opt/rocm/include; do
          AS_IF([test -f "$d/hip/hip_version.h"], [hip_version_h=$d/hip/hip_version.h; break])
        done
        AS_IF([test -n "$hip_version_h"],
          [hip_v=`sed -n 's/^#define HIP_VERSION_\(MAJOR\|MINOR\|PATCH\) *//p' "$hip_version_h" | tr -d ' ' | tr '\n' '.' | sed 's/\.$//'`
           HIP_HEADERS="HIP $hip_v headers in ${hip_version_h%/hip/hip_version.h}"])
      ], [
        HIP_CXXFLAGS="-O3 -std=c++17 -x cu -Xcompiler -fPIC -Xcompiler -fvisibility=hidden -DM3IDX_HIP_PLATFORM_NVIDIA --fmad=false -ftz=false -prec-div=true -prec-sqrt=true $hip_arch_flags"
        hip_libdir=
        for d in "$hip_root/lib64" "$hip_root/lib" "$hip_root/targets/x86_64-linux/lib"; do
          AS_IF([test -e "$d/libcudart_static.a"], [hip_libdir=$d; break])
        done
        HIP_LIBS="${hip_libdir:+-L$hip_libdir }-lcudart_static -ldl -lrt -lpthread"
      ])
      have_hip=yes
    ])
  ])
  AS_IF([test "x$have_hip" = xno && test "x$with_hip" != xguess],
    [AC_MSG_ERROR([--with-hip was given, but the HIP backend cannot be built: $hip_why])])
  AS_IF([test "x$have_hip" = xno && test "x$with_hip" = xguess],
    [AS_IF([test "x$hip_arch_given" = xno && test -n "$HIPCC"],
       [hip_why="$hip_why; pass --with-hip-arch=LIST for the targets this compiler knows"])
     AC_MSG_WARN([HIP backend not built: $hip_why. The library is CPU-only.])])
])
AS_IF([test "x$have_hip" = xyes],
  [AC_DEFINE([HAVE_HIP_PLUGIN], [1], [Define to 1 when the HIP backend plugin is built.])])
AC_SUBST([HIPCC])
AC_SUBST([HIP_PLATFORM])
AC_SUBST([HIP_ARCHS])
AC_SUBST([HIP_CXXFLAGS])
AC_SUBST([HIP_LIBS])
AC_SUBST([HIP_HEADERS])
AM_CONDITIONAL([HAVE_HIP], [test "x$have_hip" = xyes])
])
