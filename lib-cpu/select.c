/*
 * select.c - clamping, forced-block pinning and top-k of one score row
 * (SPEC sections 6 and 7).
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include "cpu.h"
#include "formats.h"

/* On the bits: positive floats order like their bits; NaN (with its
 * payload) and negative values pass unchanged, whatever the compiler
 * makes of float selects. */
float m3idx__cpu_clamp(float score) {
  uint32_t u = m3idx__float_to_bits(score);
  if (u > M3IDX_SCORE_CLAMP_BITS && u <= 0x7f800000u)
    u = M3IDX_SCORE_CLAMP_BITS;
  return m3idx__bits_to_float(u);
}

void m3idx__cpu_maxima_store(const struct m3idx_cpu_maxima *m,
                             const struct m3idx_cpu_row *rows, int nrows) {
  for (int r = 0; r < nrows; r++)
    *rows[r].out = m3idx__cpu_clamp(m->any[r] ? m->best[r] : m3idx__bits_to_float(0x7fc00000u));
}

void m3idx__cpu_pin_row(float *row, int32_t n, int32_t init_blocks,
                        int32_t local_blocks) {
  for (int32_t b = 0; b < n; b++)
    row[b] = m3idx__cpu_clamp(row[b]);
  int32_t ni = init_blocks < n ? init_blocks : n;
  for (int32_t b = 0; b < ni; b++)
    row[b] = M3IDX_SENTINEL_INIT;
  int32_t l0 = n - local_blocks > 0 ? n - local_blocks : 0;
  for (int32_t b = l0; b < n; b++)
    row[b] = M3IDX_SENTINEL_LOCAL;
}

/* A key whose unsigned order is the top-k order: score descending (-0 as
 * +0, NaN below every number), then block id ascending. */
static inline uint64_t rank_key(float score, int32_t id) {
  uint32_t u = m3idx__float_to_bits(score), k;
  if (score != score)
    k = 0;
  else {
    if (score == 0.0f)
      u = 0;
    k = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  }
  return ((uint64_t)k << 32) | (uint32_t)(0xffffffffu - (uint32_t)id);
}

void m3idx__cpu_topk_row(const float *row, int32_t n, int32_t *ids) {
  uint64_t best[M3IDX_TOPK];
  int count = 0;
  for (int32_t b = 0; b < n; b++) {
    uint64_t key = rank_key(row[b], b);
    if (count == M3IDX_TOPK && key <= best[M3IDX_TOPK - 1])
      continue;
    int i = count < M3IDX_TOPK ? count++ : M3IDX_TOPK - 1;
    while (i > 0 && best[i - 1] < key) {
      best[i] = best[i - 1];
      i--;
    }
    best[i] = key;
  }
  for (int i = 0; i < M3IDX_TOPK; i++)
    ids[i] = i < count ? (int32_t)(0xffffffffu - (uint32_t)best[i]) : -1;
}
