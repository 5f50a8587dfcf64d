/*
 * select.hip - clamping, forced-block pinning and the top-16 of each
 * (head, row) (SPEC sections 6 and 7).  One block of threads per (row,
 * head): each thread keeps the best 16 of a strided share of the blocks,
 * then the lists are merged pairwise in shared memory.  The order is a
 * total one (score, then block id), so the result does not depend on how
 * the work is split.
 *
 * SPDX-License-Identifier: MIT
 */
#include "device-math.h"

#define SELECT_THREADS 256
#define TOPK 16

/* Unsigned order = top-k order: score descending (-0 as +0, NaN below
 * every number), then block id ascending.  0 never occurs: it marks an
 * empty slot. */
M3IDX_DEV unsigned long long rank_key(float score, int id) {
  uint32_t u = f_bits(score), k;
  if (score != score)
    k = 0;
  else {
    if (score == 0.0f)
      u = 0;
    k = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  }
  return ((unsigned long long)k << 32) | (uint32_t)(0xffffffffu - (uint32_t)id);
}

/* Clamp, then the sentinels: init first, local last (local wins). */
M3IDX_DEV float pinned(float s, int b, int n, int init_blocks, int local_blocks) {
  s = clamp_score(s);
  if (b < init_blocks)
    s = 1e30f;
  if (b >= n - local_blocks)
    s = 1e29f;
  return s;
}

__global__ void __launch_bounds__(SELECT_THREADS)
pin_topk_kernel(gpu_call c, const float *scores_in, int pin, int write_pinned, int32_t *topk) {
  /* One padding slot a list: rows of 17 x 8 bytes spread the threads of a
     warp over the banks (16 x 8 would put them all in one). */
  __shared__ unsigned long long lists[SELECT_THREADS][TOPK + 1];
  __shared__ int s_n;
  const int row = blockIdx.x, h = blockIdx.y, t = threadIdx.x;
  if (t == 0) {
    int r;
    int pos = row_position(c, row, &r);
    s_n = pos < 0 ? -1 : pos / 128 + 1;
  }
  __syncthreads();
  const int n = s_n;
  if (n < 0)
    return; /* bad lengths: reported, nothing written */
  const long long off = ((long long)h * c.num_rows + row) * c.stride;
  unsigned long long best[TOPK];
#pragma unroll
  for (int i = 0; i < TOPK; i++)
    best[i] = 0;
  for (int b = t; b < n; b += SELECT_THREADS) {
    float s = scores_in[off + b];
    if (pin) {
      s = pinned(s, b, n, c.init_blocks, c.local_blocks);
      if (write_pinned)
        c.scores[off + b] = s;
    }
    if (topk == nullptr)
      continue;
    unsigned long long key = rank_key(s, b);
    if (key <= best[TOPK - 1])
      continue;
    best[TOPK - 1] = key;
#pragma unroll
    for (int i = TOPK - 1; i > 0; i--)
      if (best[i] > best[i - 1]) {
        unsigned long long x = best[i];
        best[i] = best[i - 1];
        best[i - 1] = x;
      }
  }
  if (topk == nullptr)
    return;
#pragma unroll
  for (int i = 0; i < TOPK; i++)
    lists[t][i] = best[i];
  __syncthreads();
  for (int half = SELECT_THREADS / 2; half > 0; half /= 2) {
    if (t < half) {
      const unsigned long long *a = lists[t], *bl = lists[t + half];
      unsigned long long merged[TOPK];
      int ia = 0, ib = 0;
      for (int i = 0; i < TOPK; i++)
        merged[i] = a[ia] >= bl[ib] ? a[ia++] : bl[ib++];
      for (int i = 0; i < TOPK; i++)
        lists[t][i] = merged[i];
    }
    __syncthreads();
  }
  if (t < TOPK) {
    unsigned long long k = lists[0][t];
    topk[((long long)h * c.num_rows + row) * TOPK + t] =
        k == 0 ? -1 : (int32_t)(0xffffffffu - (uint32_t)k);
  }
}

hipError_t m3idx_gpu_pin_topk(const struct gpu_call *c, const float *scores_in, int pin,
                              int write_pinned, int32_t *topk, hipStream_t s) {
  if (c->num_rows == 0)
    return hipSuccess;
  dim3 grid(c->num_rows, c->num_heads);
  hipLaunchKernelGGL(pin_topk_kernel, grid, dim3(SELECT_THREADS), 0, s, *c, scores_in, pin,
                     write_pinned, topk);
  return hipGetLastError();
}
