/*
 * cpu-features.h - what the processor runs, asked in one place: the page
 * kernels' pick (kernel-pick.c) and the bench's ceilings use these.
 * Header-only, so the m3idx command can ask without a private symbol.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_CPU_FEATURES_H
#define M3IDX_CPU_FEATURES_H

#if defined(__x86_64__) && defined(__GNUC__)
#define M3IDX_CPU_X86_64 1
#endif

/* AVX-512 F: the avx512 page kernel and the bench's SIMD read and FMA loops. */
static inline int m3idx__cpu_has_avx512f(void) {
#ifdef M3IDX_CPU_X86_64
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
#else
  return 0;
#endif
}

/* AVX-512 F, BW and VNNI, and BMI2: the vnni page kernel. */
static inline int m3idx__cpu_has_avx512vnni(void) {
#ifdef M3IDX_CPU_X86_64
  return m3idx__cpu_has_avx512f() && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("bmi2");
#else
  return 0;
#endif
}

/* The vnni kernel's instructions and AVX-512 VBMI: its vnni-vbmi build. */
static inline int m3idx__cpu_has_avx512vnni_vbmi(void) {
#ifdef M3IDX_CPU_X86_64
  return m3idx__cpu_has_avx512vnni() && __builtin_cpu_supports("avx512vbmi");
#else
  return 0;
#endif
}

#endif /* M3IDX_CPU_FEATURES_H */
