/*
 * score-decode.hip - decode scoring driven by the work map (SPEC section 9):
 * a fixed grid of ENTRY_SPLIT blocks of threads per map entry (graph-
 * stable: it depends only on the capacity), unused entries skipped; block
 * of threads s of an entry scores the entry's blocks s, s + ENTRY_SPLIT,
 * ... for every row and head of its request.
 *
 * SPDX-License-Identifier: MIT
 */
#include "score-core.h"
#include "work-map.h"

#define ENTRY_SPLIT 4

/* Calls with more than one (row, head) per request; score-decode-one.hip
 * has the kernel for one. */
__global__ void __launch_bounds__(SCORE_THREADS, 4)
score_decode_kernel(gpu_call c, const int32_t *map, int capacity) {
  __shared__ score_smem sm;
  int r, s, b0, count;
  if (map_entry(c, map, blockIdx.x / ENTRY_SPLIT, &r, &s, &b0, &count) <= 0)
    return;
  const int part = blockIdx.x % ENTRY_SPLIT;
  if (part >= count)
    return;
  fill_lut(sm);
  __syncthreads();
  const int npairs = c.query_len * c.num_heads;
  page_regs cur;
  for (int b = b0 + part; b < b0 + count; b += ENTRY_SPLIT) {
    const uint8_t *page = page_of(c, r, b);
    if (page == nullptr)
      continue;
    load_page(page, cur);
    for (int k = 0; k < npairs; k++) {
      const int j = k / c.num_heads, h = k % c.num_heads, pos = s - c.query_len + j;
      if (b * 128 > pos)
        continue; /* later rows see more: this row does not see block b */
      score_pair_page(c, sm, cur, b, score_pair{r * c.query_len + j, h, min(128, pos - b * 128 + 1)});
    }
  }
}

hipError_t m3idx_gpu_score_decode(const struct gpu_call *c, const int32_t *map, int capacity,
                                  hipStream_t s) {
  if (capacity <= 0)
    return hipSuccess;
  if (c->query_len * c->num_heads == 1)
    return m3idx_gpu_score_decode_one(c, map, capacity, s);
  hipLaunchKernelGGL(score_decode_kernel, dim3((unsigned)capacity * ENTRY_SPLIT),
                     dim3(SCORE_THREADS), 0, s, *c, map, capacity);
  return hipGetLastError();
}
