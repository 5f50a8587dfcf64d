/*
 * gemm-parts.h - what the matrix-core kernels share (score-gemm.hip on
 * NVIDIA, score-mfma.hip on AMD): the tensor-core filter's constants and
 * key factors (lib/filter-cut.h proves its bound).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_GPU_GEMM_PARTS_H
#define M3IDX_GPU_GEMM_PARTS_H

#include "score-parts.h"

#define GEMM_WARPS 4
#define GEMM_THREADS (32 * GEMM_WARPS)

/* A key's factors, A's start and its interval's width
 * (m3idx__gemm_key_factors, lib/filter-cut.h), as the kernels hold them. */
M3IDX_DEV void key_factors(uint32_t sc, int emax, float sign, float4 &factor, float &start,
                           float &width) {
  float f[4];
  m3idx__gemm_key_factors(sc, emax, sign, f, &start, &width);
  factor = float4{f[0], f[1], f[2], f[3]};
}

#define LOWEST_FLOAT (-0x1.fffffep+127f)

/* The floor of a pair whose keys' largest L is top: a key may hold the
 * largest D when L + its width reaches it.  A row without a filter (NaN
 * or infinite elements) passes every valid key; an invalid key's L is
 * -inf, so it never passes. */
M3IDX_DEV float interval_floor(const warp_query &wq, float top) {
  return wq.bound < INFINITY ? fmaxf(top, LOWEST_FLOAT) : LOWEST_FLOAT;
}

/* Buffer pair `pair' into wq (the warp's lanes together), or, for a pair
 * < 0 (a tile's row past the call's pairs, or one that sees none of the
 * block's keys), zeros: its digits are then 0 and its keys none. */
template <int P> M3IDX_DEV void load_query_or_zero(const gpu_call &c, warp_query &wq, long long pair) {
  if (pair >= 0) {
    load_query<P>(c, wq, pair);
    return;
  }
  *(float4 *)&wq.qf[4 * (threadIdx.x & 31)] = float4{0.0f, 0.0f, 0.0f, 0.0f};
  if ((threadIdx.x & 31) == 0)
    wq.bound = 0.0f;
  M3IDX_SYNCWARP();
}

#endif /* M3IDX_GPU_GEMM_PARTS_H */
