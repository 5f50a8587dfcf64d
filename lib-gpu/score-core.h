/*
 * score-core.h - one page against a batch of (row, head) pairs: the part
 * of scoring that decode and prefill share.  128 threads, thread t owns
 * key slot t; the block maximum is a shared-memory tree (order-free, and
 * independent of the warp width).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_GPU_SCORE_CORE_H
#define M3IDX_GPU_SCORE_CORE_H

#include "device-math.h"

#define SCORE_THREADS 128
#define SCORE_PAIRS 8

struct score_pair {
  int row, head, nkeys; /* nkeys: causal keys of this block for the row, 1..128 */
};

struct score_smem {
  float q[SCORE_PAIRS][128];
  float red[SCORE_PAIRS][SCORE_THREADS];
  int unfused[SCORE_PAIRS];
  score_pair pair[SCORE_PAIRS];
};

/* Score block b (its key already in k) for sm.pair[0..n).  Every thread
 * calls this with the same n; it begins and ends with a barrier. */
M3IDX_DEV void score_pairs(const gpu_call &c, const key_regs &k, int b, int n, score_smem &sm) {
  const int t = threadIdx.x;
  if (t < SCORE_PAIRS)
    sm.unfused[t] = 0;
  __syncthreads();
  for (int i = t; i < n * 128; i += SCORE_THREADS) {
    int p = i / 128, d = i % 128;
    long long qi = ((long long)sm.pair[p].row * c.num_heads + sm.pair[p].head) * 128 + d;
    float v = query_f(c.query, c.dtype, qi);
    sm.q[p][d] = v;
    if (v > 0x1p125f || v < -0x1p125f)
      atomicOr(&sm.unfused[p], 1);
  }
  __syncthreads();
  for (int p = 0; p < n; p++)
    sm.red[p][t] = t < sm.pair[p].nkeys ? key_logit(k, sm.q[p], !sm.unfused[p], c.scale) : nan_f();
  __syncthreads();
  for (int stride = SCORE_THREADS / 2; stride > 0; stride /= 2) {
    if (t < stride)
      for (int p = 0; p < n; p++)
        sm.red[p][t] = max_ignoring_nan(sm.red[p][t], sm.red[p][t + stride]);
    __syncthreads();
  }
  if (t < n) {
    const score_pair &pr = sm.pair[t];
    /* An all-NaN block scores the one quiet NaN 0x7fc00000 on every
       backend.  Done on the integer bits: LLVM treats NaN payloads as
       unspecified and may fold a floating-point `v != v ? NaN : v'. */
    uint32_t u = f_bits(clamp_score(sm.red[t][0]));
    if ((u & 0x7fffffffu) > 0x7f800000u)
      u = 0x7fc00000u;
    ((uint32_t *)c.scores)[((long long)pr.head * c.num_rows + pr.row) * c.stride + b] = u;
  }
  __syncthreads();
}

#endif /* M3IDX_GPU_SCORE_CORE_H */
