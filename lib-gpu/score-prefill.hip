/*
 * score-prefill.hip - ragged prefill scoring with context: a grid of
 * (block, tile of rows); each page is read once per tile and scored for
 * the tile's rows that see it, request by request (a tile may span
 * requests).
 *
 * SPDX-License-Identifier: MIT
 */
#include "score-core.h"

#define ROW_TILE 16

__global__ void __launch_bounds__(SCORE_THREADS) score_prefill_kernel(gpu_call c) {
  __shared__ score_smem sm;
  __shared__ int s_req[ROW_TILE], s_pos[ROW_TILE];
  const int b = blockIdx.x, row0 = blockIdx.y * ROW_TILE, t = threadIdx.x;
  if (t < ROW_TILE) {
    int row = row0 + t, r = -1, pos = -1;
    if (row < c.num_rows)
      pos = row_position(c, row, &r);
    s_req[t] = r;
    s_pos[t] = pos;
  }
  __syncthreads();
  int any = 0;
  for (int i = 0; i < ROW_TILE; i++)
    any |= s_pos[i] >= b * 128;
  if (!any)
    return;
  fill_lut(sm);
  __syncthreads();
  int i = 0;
  while (i < ROW_TILE) {
    if (s_pos[i] < b * 128) {
      i++;
      continue;
    }
    /* The rows of one request that see block b. */
    const int r = s_req[i];
    int end = i;
    while (end < ROW_TILE && s_req[end] == r)
      end++;
    const uint8_t *page = page_of(c, r, b);
    if (page != nullptr) {
      page_regs pr;
      load_page(page, pr);
      score_pair pairs[CHUNK_PAIRS];
      int n = 0;
      for (int j = i; j < end; j++) {
        int pos = s_pos[j];
        if (pos < b * 128)
          continue;
        for (int h = 0; h < c.num_heads; h++) {
          pairs[n++] = score_pair{row0 + j, h, min(128, pos - b * 128 + 1)};
          if (n == CHUNK_PAIRS) {
            score_chunk(c, sm, pr, b, pairs, n);
            n = 0;
          }
        }
      }
      if (n > 0)
        score_chunk(c, sm, pr, b, pairs, n);
    }
    i = end;
  }
}

hipError_t m3idx_gpu_score_prefill(const struct gpu_call *c, hipStream_t s) {
  if (c->num_rows == 0)
    return hipSuccess;
  dim3 grid(c->width, (c->num_rows + ROW_TILE - 1) / ROW_TILE);
  hipLaunchKernelGGL(score_prefill_kernel, grid, dim3(SCORE_THREADS), 0, s, *c);
  return hipGetLastError();
}
