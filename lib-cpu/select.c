/*
 * select.c - clamping, forced-block pinning and top-k of one score row
 * (SPEC sections 6 and 7).
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include "cpu.h"
#include "spec-rules.h"

void m3idx__cpu_pin_row(float *row, int32_t n, int32_t init_blocks,
                        int32_t local_blocks) {
  for (int32_t b = 0; b < n; b++)
    row[b] = m3idx__pinned(row[b], b, n, init_blocks, local_blocks);
}

void m3idx__cpu_topk_row(const float *row, int32_t n, int32_t *ids) {
  uint64_t best[M3IDX_TOPK];
  int count = 0;
  for (int32_t b = 0; b < n; b++) {
    uint64_t key = m3idx__rank_key(row[b], b);
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
    ids[i] = i < count ? m3idx__rank_key_id(best[i]) : -1;
}
