/*
 * kernel-pick.c - choose the page kernel at run time.
 *
 * M3IDX_CPU_ISA=scalar|fp64|avx512|vnni|vnni-vbmi forces one (the tests run each and
 * compare bytes); otherwise the fastest the processor runs.  Every kernel
 * gives the exact score rounded once, so the choice changes no bit.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu-features.h"
#include "cpu.h"

static int always(void) { return 1; }

/* The kernels, fastest first: the first usable one is taken, unless
 * M3IDX_CPU_ISA names another; each with verification's kernels of the
 * same instructions (bound.c). */
static const struct {
  const char *name;
  m3idx_cpu_page_kernel fn;
  m3idx_cpu_terms_kernel terms;
  m3idx_cpu_floor_key floor_key;
  int (*usable)(void);
} kernels[] = {
#ifdef M3IDX_CPU_HAVE_AVX512
    {"vnni-vbmi", m3idx__cpu_page_scores_vnni_vbmi, m3idx__cpu_block_terms_vnni,
     m3idx__cpu_floor_key_vnni, m3idx__cpu_has_avx512vnni_vbmi},
    {"vnni", m3idx__cpu_page_scores_vnni, m3idx__cpu_block_terms_vnni,
     m3idx__cpu_floor_key_vnni, m3idx__cpu_has_avx512vnni},
    {"avx512", m3idx__cpu_page_scores_avx512, m3idx__cpu_block_terms_rule,
     m3idx__cpu_floor_key_rule, m3idx__cpu_has_avx512f},
#endif
    {"fp64", m3idx__cpu_page_scores_fp64, m3idx__cpu_block_terms_rule,
     m3idx__cpu_floor_key_rule, always},
    {"scalar", m3idx__cpu_page_scores_scalar, m3idx__cpu_block_terms_rule,
     m3idx__cpu_floor_key_rule, always},
};
#define NKERNELS (sizeof kernels / sizeof kernels[0])

m3idx_cpu_page_kernel m3idx__cpu_pick_kernel(const char **name, m3idx_cpu_terms_kernel *terms,
                                             m3idx_cpu_floor_key *floor_key,
                                             struct m3idx_errbuf *err) {
  const char *want = getenv("M3IDX_CPU_ISA");
  const int forced = want != NULL && *want != '\0';
  for (size_t i = 0; i < NKERNELS; i++)
    if ((!forced || strcmp(want, kernels[i].name) == 0) && kernels[i].usable()) {
      *name = kernels[i].name;
      *terms = kernels[i].terms;
      *floor_key = kernels[i].floor_key;
      return kernels[i].fn;
    }
  char usable[128] = "";
  for (size_t i = NKERNELS; i-- > 0;)
    if (kernels[i].usable())
      snprintf(usable + strlen(usable), sizeof usable - strlen(usable), "%s%s",
               usable[0] ? ", " : "", kernels[i].name);
  snprintf(err->msg, sizeof err->msg, "M3IDX_CPU_ISA is '%s': this processor and build run %s",
           want, usable);
  return NULL;
}
