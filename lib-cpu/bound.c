/*
 * bound.c - the terms of verification's bound for a list of blocks
 * (lib/verify-rules.h): each item's block gets the largest A and K over
 * its causal keys, integers rounded from the row's magnitudes, so the
 * bits equal the HIP backend's; the kernel is the page kernel's pick
 * (kernel-pick.c).
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include "cpu.h"
#include "fp-env.h"
#include "omp-compat.h"
#include "verify-rules.h"

void m3idx__cpu_block_terms_rule(const uint32_t *qi, int32_t s, const uint8_t *codes,
                                 const uint8_t *scales, int32_t keys, double *out) {
  m3idx__verify_block_terms(qi, s, codes, scales, keys, out);
}

int32_t m3idx__cpu_floor_key_rule(const uint8_t *scales, int32_t keys) {
  return m3idx__verify_floor_key(scales, keys);
}

/* Items between a floor and the one whose scales are prefetched. */
#define FLOOR_AHEAD 4

void m3idx__cpu_block_bounds(struct m3idx_cpu_state *s, const struct m3idx_call *c) {
  m3idx__cpu_decode_queries(s, c);
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
      /* A floor reads a page's 512 scale bytes, then one key: the scales of
         the floor FLOOR_AHEAD items on are asked for now (a hint). */
      const int32_t *ahead = item + 3 * FLOOR_AHEAD;
      if (i + FLOOR_AHEAD < n && ahead[2] < 0)
        for (int l = 0; l < 4 * M3IDX_BLOCK_SIZE / 64; l++)
          __builtin_prefetch(c->pages + (int64_t)ahead[1] * M3IDX_PAGE_BYTES +
                                 M3IDX_PAGE_DATA_BYTES + 64 * l, 0, 2);
      if (item[0] != row) {
        row = item[0];
        shift = m3idx__verify_row_ints(s->query_f32 + (int64_t)row * M3IDX_HEAD_DIM, qi);
      }
      const uint8_t *page = c->pages + (int64_t)item[1] * M3IDX_PAGE_BYTES;
      const uint8_t *scales = page + M3IDX_PAGE_DATA_BYTES;
      /* A floor (keys negated) is one key's terms: m3idx__verify_floor_terms. */
      const int32_t t = item[2] < 0 ? s->floor_key(scales, -item[2]) : 0;
      const int32_t keys = item[2] < 0 ? t >= 0 : item[2];
      m3idx_cpu_terms_kernel terms = /* the picked instructions' kernel */
          shift != M3IDX_VERIFY_NO_SHIFT ? s->terms : m3idx__cpu_block_terms_rule;
      terms(qi, shift, page + 64 * t, scales + 4 * t, keys, c->bound_terms + 2 * i);
    }
    m3idx__fpenv_leave(env);
  }
}
