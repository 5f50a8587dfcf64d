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

#include <stdlib.h>

#define ENTRY_SPLIT 4

/* ONE_PAIR: a single (row, head) per request, whose query is loaded once
 * (score-decode-one.hip has the kernel such calls use). */
template <bool ONE_PAIR>
__global__ void __launch_bounds__(SCORE_THREADS, 6)
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
  /* One (row, head): its query stays in registers for every block. */
  float q1[1][32];
  int unfused1[1] = {0};
  if (ONE_PAIR)
    load_query(c, score_pair{r, 0, 128}, q1[0], &unfused1[0]); /* row r: query_len 1 */
  page_regs cur;
  for (int b = b0 + part; b < b0 + count; b += ENTRY_SPLIT) {
    const uint8_t *page = page_of(c, r, b);
    if (page == nullptr)
      continue;
    load_page(page, cur);
    for (int p0 = 0; p0 < npairs; p0 += CHUNK_PAIRS) {
      score_pair pairs[CHUNK_PAIRS];
      int n = 0;
      for (int k = p0; k < npairs && n < CHUNK_PAIRS; k++) {
        int j = k / c.num_heads, h = k % c.num_heads;
        int pos = s - c.query_len + j;
        if (b * 128 > pos)
          continue; /* later rows see more: this row does not see block b */
        pairs[n++] = score_pair{r * c.query_len + j, h, min(128, pos - b * 128 + 1)};
      }
      if (n > 0 && ONE_PAIR)
        score_chunk_q(c, sm, cur, b, pairs, n, q1, unfused1);
      else if (n > 0)
        score_chunk(c, sm, cur, b, pairs, n);
    }
  }
}

hipError_t m3idx_gpu_score_decode(const struct gpu_call *c, const int32_t *map, int capacity,
                                  hipStream_t s) {
  if (capacity <= 0)
    return hipSuccess;
  const char *e = getenv("M3IDX_GPU_DECODE"); /* tuning: "old" */
  if (c->query_len * c->num_heads == 1 && !(e && e[0] == 'o'))
    return m3idx_gpu_score_decode_one(c, map, capacity, s);
  if (c->query_len * c->num_heads == 1)
    hipLaunchKernelGGL(score_decode_kernel<true>, dim3((unsigned)capacity * ENTRY_SPLIT),
                       dim3(SCORE_THREADS), 0, s, *c, map, capacity);
  else
    hipLaunchKernelGGL(score_decode_kernel<false>, dim3((unsigned)capacity * ENTRY_SPLIT),
                       dim3(SCORE_THREADS), 0, s, *c, map, capacity);
  return hipGetLastError();
}
