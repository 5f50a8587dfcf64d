/*
 * vendor-nvidia.h - NVIDIA's room in the scoring kernels: its path macro,
 * its launch bounds, warp reductions by redux.sync, and the integer
 * filter of its fast path (the row cut into digit planes, code bytes by
 * prmt, dp4a sums; lib/filter-cut.h proves its bound).  score-parts.h
 * includes it and calls it where INT_FILTER(P) holds.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_GPU_VENDOR_NVIDIA_H
#define M3IDX_GPU_VENDOR_NVIDIA_H

#include "device-math.h"
#include "filter-cut.h"

#if defined(M3IDX_HIP_PLATFORM_NVIDIA)

/* NVIDIA's fast path filters with integers (prmt, dp4a). */
#define INT_FILTER(P) ((P) != M3IDX_GPU_PATH_PLAIN)

/* At most 80 registers, so that 6 blocks (24 warps) fit an SM: the
 * kernels wait on memory more than they issue (ncu, 82 registers: 18
 * warps active, 0.64 instructions a cycle a scheduler). */
#define FP64_BOUNDS __launch_bounds__(FP64_THREADS, 6)

/* The largest and smallest over the warp: one redux.sync on sm_80 and
 * later instead of five shuffles. */
template <class T> M3IDX_DEV T nv_warp_max(T v) {
#if __CUDA_ARCH__ >= 800
  return __reduce_max_sync(0xffffffffu, v);
#else
  for (int m = 1; m < 32; m <<= 1)
    v = max(v, M3IDX_SHFL_XOR(v, m));
  return v;
#endif
}
template <class T> M3IDX_DEV T nv_warp_min(T v) {
#if __CUDA_ARCH__ >= 800
  return __reduce_min_sync(0xffffffffu, v);
#else
  for (int m = 1; m < 32; m <<= 1)
    v = min(v, M3IDX_SHFL_XOR(v, m));
  return v;
#endif
}

/* The largest float over the warp: its bits taken to an integer of the
 * same order (negative values' magnitude bits flipped), so that
 * redux.sync finds it (a NaN may come out, which the filter's callers
 * take as no bound: floor_of). */
M3IDX_DEV float nv_warp_max_float(float v) {
#if __CUDA_ARCH__ >= 800
  const int b = __float_as_int(v);
  const int m = __reduce_max_sync(0xffffffffu, b < 0 ? b ^ 0x7fffffff : b);
  return __int_as_float(m < 0 ? m ^ 0x7fffffff : m);
#else
  for (int m = 1; m < 32; m <<= 1)
    v = fmaxf(v, M3IDX_SHFL_XOR(v, m));
  return v;
#endif
}

/* The largest byte of the sixteen of a lane's four scale words, two
 * bytes a compare (DPX). */
M3IDX_DEV int nv_scale_bytes_max(const uint32_t scales[4]) {
  uint32_t h[8];
#pragma unroll
  for (int i = 0; i < 4; i++) {
    h[2 * i] = scales[i] & 0x00ff00ffu;
    h[2 * i + 1] = (scales[i] >> 8) & 0x00ff00ffu;
  }
  const uint32_t m = __vmaxu2(__vimax3_u16x2(h[0], h[1], h[2]),
                              __vimax3_u16x2(__vimax3_u16x2(h[3], h[4], h[5]), h[6], h[7]));
  return (int)max(m & 0xffffu, m >> 16);
}

/* The row cut for the integer filter: Q = q * 2^(bits - Hq) truncated
 * (bits: M3IDX_CUT_BITS, or M3IDX_GEMM_CUT_BITS for the tensor-core
 * form), in two signed 8-bit digit planes, Q = 256 hi + lo; word w of a
 * plane holds elements 4w .. 4w + 3; bias: 12 * sum Q a group.  Lane l
 * cuts elements 4l .. 4l + 3 of the row qf (a row with NaN or inf
 * elements is not filtered; its digits are not used). */
M3IDX_DEV void cut_row(const float *qf, int32_t lo_plane[32], int32_t hi_plane[32],
                       int32_t bias[4], int bits) {
  const int lane = threadIdx.x & 31;
  uint32_t top = 0u;
#pragma unroll
  for (int i = 0; i < 4; i++)
    top = max(top, f_bits(qf[4 * lane + i]) & 0x7fffffffu);
  top = nv_warp_max(top);
  const int32_t hq = m3idx__cut_exponent(top);
  uint32_t lo = 0u, hi = 0u;
  int sum = 0;
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const float q = qf[4 * lane + i];
    const int32_t v = m3idx__cut_q_finite(q, hq, bits);
    lo |= m3idx__cut_lo(v) << (8 * i);
    hi |= m3idx__cut_hi(v) << (8 * i);
    sum += v;
  }
  lo_plane[lane] = (int32_t)lo;
  hi_plane[lane] = (int32_t)hi;
  for (int m = 1; m < 8; m <<= 1)
    sum += M3IDX_SHFL_XOR(sum, m);
  if ((lane & 7) == 0)
    bias[lane >> 3] = M3IDX_CUT_CODE_BIAS * sum;
}

M3IDX_DEV int dot4_u8s8(uint32_t a, int32_t b, int c) {
  int d;
  asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

/* group_scale for the integer filter (score_pair's lane_filter_int):
 * below fp32's normals 2^-126, not 0.  An integer group sum |S| < 2^23
 * times it is exact either way, and the factor's excess, below 2^-103, is
 * inside the bound's allowance for factors under the normals
 * (lib/filter-cut.h); one max, no select. */
M3IDX_DEV float int_group_scale(uint32_t scales, int g, int emax) {
  return bits_f((uint32_t)max((int)((scales >> (8 * g)) & 255u) + (127 - emax), 1) << 23);
}

/* The prmt tables of code_bytes, held in registers: ptxas otherwise
 * copies each constant into a register again before every prmt. */
struct code_tables {
  uint32_t pos, neg;
};

M3IDX_DEV code_tables code_tables_now() {
  /* blockDim.x <= 1024, so the shift is 0, but ptxas cannot know it. */
  const uint32_t zero = threadIdx.x >> 10;
  return code_tables{0x0f0e0d0cu + zero, 0x090a0b0cu + zero};
}

M3IDX_DEV uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

/* Bytes of the eight codes of word w, value in halves + 12: lo of codes
 * 0..3, hi of codes 4..7.  prmt: a selector nibble of 8 or more
 * replicates the sign of the byte it names, 0 for these tables, so the
 * table of w answers the codes of sign 0 and that of w ^ 0x88888888 those
 * of sign 1.  The two answers share no byte and join by an add, and the
 * upper halves come down by a multiply-high, so that ptxas may put both
 * on the FMA pipe beside the ALU's prmt and lop3. */
M3IDX_DEV void code_bytes(uint32_t w, const code_tables &t, uint32_t &lo, uint32_t &hi) {
  const uint32_t x = w ^ 0x88888888u;
  lo = prmt(t.pos, 0x18141210u, w) + prmt(t.neg, 0x00040608u, x);
  hi = prmt(t.pos, 0x18141210u, __umulhi(w, 0x10000u)) +
       prmt(t.neg, 0x00040608u, __umulhi(x, 0x10000u));
}

/* A of the lane's keys lane + 32 i (lib/filter-cut.h): exact integer
 * group sums, each times 2^(e_g - emax) in fp32, added group by group.
 * The loop runs over groups first, so that a group's query digits are
 * read once for the four keys and their four code loads are in flight
 * together.  STAGED: the page is in shared memory, and group 0's words
 * are loaded with the others. */
template <int P, bool STAGED>
M3IDX_DEV void lane_filter_int(const int32_t *lo_plane, const int32_t *hi_plane,
                               const int32_t *bias_of, const uint8_t *page, const uint4 first[4],
                               const uint32_t scales[4], int emax, float a[4]) {
  const int lane = threadIdx.x & 31;
  const code_tables tab = code_tables_now();
#pragma unroll
  for (int i = 0; i < 4; i++)
    a[i] = 0.0f;
#pragma unroll
  for (int g = 0; g < 4; g++) {
    uint4 raw[4];
#pragma unroll
    for (int i = 0; i < 4; i++)
      raw[i] = !STAGED && g == 0 ? first[i]
                                 : *(const uint4 *)(page + 64 * (lane + 32 * i) + 16 * g);
    const int4 l0 = *(const int4 *)&lo_plane[8 * g], l1 = *(const int4 *)&lo_plane[8 * g + 4];
    const int4 h0 = *(const int4 *)&hi_plane[8 * g], h1 = *(const int4 *)&hi_plane[8 * g + 4];
    const int32_t lo[8] = {l0.x, l0.y, l0.z, l0.w, l1.x, l1.y, l1.z, l1.w};
    const int32_t hi[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
    const int bias = bias_of[g];
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const uint32_t w[4] = {path_word<P>(raw[i].x), path_word<P>(raw[i].y),
                             path_word<P>(raw[i].z), path_word<P>(raw[i].w)};
      int sl = 0, sh = 0;
#pragma unroll
      for (int j = 0; j < 4; j++) { /* word j: elements 8j .. 8j + 7 of the group */
        uint32_t k0, k1;
        code_bytes(w[j], tab, k0, k1);
        sl = dot4_u8s8(k0, lo[2 * j], sl);
        sh = dot4_u8s8(k0, hi[2 * j], sh);
        sl = dot4_u8s8(k1, lo[2 * j + 1], sl);
        sh = dot4_u8s8(k1, hi[2 * j + 1], sh);
      }
      const int sg = sh * 256 + sl - bias;
      a[i] = fmaf((float)sg, int_group_scale(scales[i], g, emax), a[i]);
    }
  }
}

#else
#define INT_FILTER(P) false
#endif /* M3IDX_HIP_PLATFORM_NVIDIA */

#endif /* M3IDX_GPU_VENDOR_NVIDIA_H */
