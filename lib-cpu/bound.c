/*
 * bound.c - the terms of verification's bound for a list of blocks
 * (lib/verify-rules.h): each item's block gets the largest A and K over
 * its causal keys, integers rounded from the row's magnitudes, so the
 * bits equal the HIP backend's.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include "cpu.h"
#include "fp-env.h"
#include "omp-compat.h"
#include "verify-rules.h"

void m3idx__cpu_block_bounds(struct m3idx_cpu_state *s, const struct m3idx_call *c) {
  m3idx__cpu_decode_queries(s, c);
  const int64_t n = c->bound_count;
#pragma omp parallel num_threads(m3idx__cpu_team(s))
  {
    /* The groups' terms add in round-to-nearest, as on the device. */
    m3idx_fpenv env = m3idx__fpenv_enter();
#pragma omp for schedule(dynamic, 4)
  for (int64_t i = 0; i < n; i++) {
    const int32_t *item = c->bound_items + 3 * i;
    const float *q = s->query_f32 + (int64_t)item[0] * M3IDX_HEAD_DIM;
    float amax = 0.0f;
    for (int d = 0; d < M3IDX_HEAD_DIM; d++)
      amax = fabsf(q[d]) > amax || q[d] != q[d] ? fabsf(q[d]) : amax;
    const int32_t shift = m3idx__verify_shift(amax);
    uint32_t qi[M3IDX_HEAD_DIM];
    for (int d = 0; d < M3IDX_HEAD_DIM; d++)
      qi[d] = shift == M3IDX_VERIFY_NO_SHIFT ? 0 : m3idx__verify_query_int(q[d], shift);
    m3idx__verify_block_terms(qi, shift, c->pages + (int64_t)item[1] * M3IDX_PAGE_BYTES,
                              item[2], c->bound_terms + 2 * i);
  }
    m3idx__fpenv_leave(env);
  }
}
