/*
 * bound.c - the terms of verification's bound for a list of blocks
 * (lib/verify-rules.h): each item's block gets the largest A and K over
 * its causal keys, integers rounded from the row's magnitudes, so the
 * bits equal the HIP backend's.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "cpu-features.h"
#include "cpu.h"
#include "fp-env.h"
#include "omp-compat.h"
#include "verify-rules.h"

/* The VNNI form where the processor runs it and M3IDX_CPU_ISA (which names
 * the page kernels, kernel-pick.c) does not ask for a kernel without it. */
static int vnni_terms(void) {
#ifdef M3IDX_CPU_HAVE_AVX512
  const char *want = getenv("M3IDX_CPU_ISA");
  return m3idx__cpu_has_avx512vnni() &&
         (want == NULL || *want == '\0' || strncmp(want, "vnni", 4) == 0);
#else
  return 0;
#endif
}

void m3idx__cpu_block_bounds(struct m3idx_cpu_state *s, const struct m3idx_call *c) {
  m3idx__cpu_decode_queries(s, c);
  const int vnni = vnni_terms();
  (void)vnni; /* without AVX-512 in the build */
  const int64_t n = c->bound_count;
#pragma omp parallel num_threads(m3idx__cpu_team(s))
  {
    /* The groups' terms add in round-to-nearest, as on the device. */
    m3idx_fpenv env = m3idx__fpenv_enter();
    /* The row's integers, kept while the items stay on one row. */
    int32_t row = -1, shift = 0;
    uint32_t qi[M3IDX_HEAD_DIM];
#pragma omp for schedule(dynamic, 16)
  for (int64_t i = 0; i < n; i++) {
    const int32_t *item = c->bound_items + 3 * i;
    if (item[0] != row) {
      row = item[0];
      const float *q = s->query_f32 + (int64_t)row * M3IDX_HEAD_DIM;
      float amax = 0.0f;
      for (int d = 0; d < M3IDX_HEAD_DIM; d++)
        amax = fabsf(q[d]) > amax || q[d] != q[d] ? fabsf(q[d]) : amax;
      shift = m3idx__verify_shift(amax);
      for (int d = 0; d < M3IDX_HEAD_DIM; d++)
        qi[d] = shift == M3IDX_VERIFY_NO_SHIFT ? 0 : m3idx__verify_query_int(q[d], shift);
    }
    const uint8_t *page = c->pages + (int64_t)item[1] * M3IDX_PAGE_BYTES;
#ifdef M3IDX_CPU_HAVE_AVX512
    if (vnni && shift != M3IDX_VERIFY_NO_SHIFT) {
      m3idx__cpu_block_terms_vnni(qi, shift, page, item[2], c->bound_terms + 2 * i);
      continue;
    }
#endif
    m3idx__verify_block_terms(qi, shift, page, item[2], c->bound_terms + 2 * i);
  }
    m3idx__fpenv_leave(env);
  }
}
