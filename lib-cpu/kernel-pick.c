/*
 * kernel-pick.c - choose the page kernel at run time.
 *
 * M3IDX_CPU_ISA=scalar|avx512 forces one (the tests run each and compare
 * bytes); otherwise the fastest the processor runs.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

static int have_avx512(void) {
#ifdef M3IDX_CPU_HAVE_AVX512
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
#else
  return 0;
#endif
}

m3idx_cpu_page_kernel m3idx__cpu_pick_kernel(const char **name,
                                             struct m3idx_errbuf *err) {
  const char *want = getenv("M3IDX_CPU_ISA");
  if (want != NULL && *want != '\0') {
    if (strcmp(want, "scalar") == 0) {
      *name = "scalar";
      return m3idx__cpu_page_scores_scalar;
    }
#ifdef M3IDX_CPU_HAVE_AVX512
    if (strcmp(want, "avx512") == 0 && have_avx512()) {
      *name = "avx512";
      return m3idx__cpu_page_scores_avx512;
    }
#endif
    snprintf(err->msg, sizeof err->msg,
             "M3IDX_CPU_ISA is '%s': this processor and build run scalar%s",
             want, have_avx512() ? " and avx512" : "");
    return NULL;
  }
#ifdef M3IDX_CPU_HAVE_AVX512
  if (have_avx512()) {
    *name = "avx512";
    return m3idx__cpu_page_scores_avx512;
  }
#endif
  *name = "scalar";
  return m3idx__cpu_page_scores_scalar;
}
