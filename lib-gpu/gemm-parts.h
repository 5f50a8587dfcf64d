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
#define MAGIC_BITS 0x4b400000 /* 1.5 * 2^23: a group's sum S reads as 1.5 * 2^23 + S */
#define MAGIC_F 12582912.0f

/* The factors of a key of scale word sc: F_g = 2^(e_g - emax) (2^-126
 * below fp32's normals) times sign(scale), 0 for a NaN scale; A's start
 * -C - e_k = -1.5 * 2^23 * sum F_g - e_k, so that A lands at the low end
 * L_k of the key's interval (-inf for a NaN scale: its logit is NaN,
 * ignored); and the interval's width 2 e_k (lib/filter-cut.h). */
M3IDX_DEV void key_factors(uint32_t sc, int emax, float sign, float4 &factor, float &start,
                           float &width) {
  const bool nan = m3idx__nan_scale_bytes(sc) != 0u;
  float f[4];
#pragma unroll
  for (int g = 0; g < 4; g++) {
    const int e = (int)((sc >> (8 * g)) & 255u) + (127 - emax);
    f[g] = nan ? 0.0f : sign * bits_f((uint32_t)max(e, 1) << 23);
  }
  float cm = MAGIC_F * f[0];
#pragma unroll
  for (int g = 1; g < 4; g++)
    cm = fmaf(MAGIC_F, f[g], cm);
  const float e_k =
      m3idx__gemm_key_error((fabsf(f[0]) + fabsf(f[1])) + (fabsf(f[2]) + fabsf(f[3])));
  factor = float4{f[0], f[1], f[2], f[3]};
  start = nan ? -INFINITY : -cm - e_k;
  width = 2.0f * e_k;
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
