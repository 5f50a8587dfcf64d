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

/* Bits 0 and 1: whether the intervals [a, a + w] of two keys reach the
 * pair's floor (interval_floor). */
M3IDX_DEV uint32_t reach_bits(float a0, float a1, float2 w, float floor) {
  return (uint32_t)(a0 + w.x >= floor) | (uint32_t)(a1 + w.y >= floor) << 1;
}

/* A candidate of the exact sums: its pair's query, its key and scale word. */
struct quad_key {
  const warp_query *wq;
  const uint8_t *key;
  uint32_t scales;
};

/* The candidates left pending after the fp64 deferral (NR masks a lane,
 * bit i of mask r as where(src, r, i) names it for lane src), summed
 * exactly a quad of lanes a key: each quad takes one key of its four
 * lanes at a time and sums it with quad_key_dot, the eight quads at once;
 * the lane that had it keeps it in best[r].  A quad with none left sums
 * a key it drops, so that every lane takes part in the shuffles. */
template <int NR, class Where>
M3IDX_DEV void sum_quad_candidates(const double *e2m1, uint32_t (&pending)[NR],
                                   m3idx__block_best (&best)[NR], float scale, Where where) {
  const int lane = threadIdx.x & 31, gid = lane >> 2;
  for (;;) {
    uint32_t any = 0u;
#pragma unroll
    for (int r = 0; r < NR; r++)
      any |= pending[r];
    const uint32_t have = M3IDX_BALLOT32(any != 0u);
    if (have == 0u)
      break;
    const uint32_t quad = (have >> (4 * gid)) & 15u;
    const int src = 4 * gid + (quad != 0u ? __ffs((int)quad) - 1 : 0);
    int mine = 0;
#pragma unroll
    for (int r = NR - 1; r >= 0; r--)
      mine = pending[r] != 0u ? 32 * r + __ffs((int)pending[r]) - 1 : mine;
    const int pick = M3IDX_SHFL32(mine, src);
    const quad_key k = where(src, pick >> 5, pick & 31);
    const double d = quad_key_dot(e2m1, *k.wq, k.key, k.scales);
    const bool own = lane == src && quad != 0u;
#pragma unroll
    for (int r = 0; r < NR; r++) {
      if (own && pick >> 5 == r) {
        pending[r] &= pending[r] - 1u;
        m3idx__best_take_d(&best[r], d, scale);
      }
    }
  }
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
