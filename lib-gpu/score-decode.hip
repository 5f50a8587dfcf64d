/*
 * score-decode.hip - decode scoring driven by the work map (SPEC section 9):
 * one block of threads per map entry, a fixed grid of the map's capacity,
 * unused entries skipped; each entry scores its blocks for every row and
 * head of its request.
 *
 * SPDX-License-Identifier: MIT
 */
#include "score-core.h"

__global__ void __launch_bounds__(SCORE_THREADS)
score_decode_kernel(gpu_call c, const int32_t *map, int capacity) {
  __shared__ score_smem sm;
  const int e = blockIdx.x, t = threadIdx.x;
  const int r = map[2 * e], w = map[2 * e + 1];
  if (r == -1)
    return;
  if (r < 0 || r >= c.num_reqs) {
    if (t == 0)
      atomicOr(c.err, M3IDX_GPU_BAD_WORK_MAP);
    return;
  }
  const int s = c.seq_lens[r];
  if (s < c.query_len || s > c.max_seq_len) {
    if (t == 0)
      atomicOr(c.err, M3IDX_GPU_BAD_SEQ_LENS);
    return;
  }
  const int b0 = w & 0x00ffffff, count = w >> 24, nblocks = (s + 127) / 128;
  if (count < 1 || b0 + count > nblocks) {
    if (t == 0)
      atomicOr(c.err, M3IDX_GPU_BAD_WORK_MAP);
    return;
  }
  for (int b = b0; b < b0 + count; b++) {
    const uint8_t *page = page_of(c, r, b);
    if (page == nullptr)
      continue;
    key_regs k;
    load_key(page, t, k);
    int n = 0;
    for (int j = 0; j < c.query_len; j++) {
      int pos = s - c.query_len + j;
      if (b * 128 > pos)
        continue;
      int nkeys = min(128, pos - b * 128 + 1);
      for (int h = 0; h < c.num_heads; h++) {
        if (t == 0)
          sm.pair[n] = score_pair{r * c.query_len + j, h, nkeys};
        if (++n == SCORE_PAIRS) {
          score_pairs(c, k, b, n, sm);
          n = 0;
        }
      }
    }
    if (n > 0)
      score_pairs(c, k, b, n, sm);
  }
}

hipError_t m3idx_gpu_score_decode(const struct gpu_call *c, const int32_t *map, int capacity,
                                  hipStream_t s) {
  if (capacity <= 0)
    return hipSuccess;
  hipLaunchKernelGGL(score_decode_kernel, dim3(capacity), dim3(SCORE_THREADS), 0, s, *c, map,
                     capacity);
  return hipGetLastError();
}
