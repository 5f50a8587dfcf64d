/*
 * score-core.h - what the decode kernels share: the e2m1 decoding (a
 * shared byte table, and the table-free e2m1_word that prefill uses), the
 * query loads, the in-order group sum of SPEC section 4, and the score
 * store.
 *
 * The decode kernels give a key to a team of four consecutive lanes, lane
 * g of the team its scale group g: it loads the group's 16 bytes (so a
 * warp's loads are contiguous) and sums its 32 products in element order;
 * the team then adds the four scaled sums as (s0 + s1) + (s2 + s3)
 * through butterflies of distance 1 and 2 (IEEE addition commutes, so
 * every lane of the team gets the same bits).  Nothing depends on the warp
 * width: teams of 4 divide any warp, and block maxima are order-free.
 *
 * e2m1 pairs are decoded through a shared table of byte -> (low, high)
 * float pairs, replicated over 16 columns so that the lanes of a half-warp
 * never share a bank (on NVIDIA, the one-pair kernel has a wider table of
 * its own: score-decode-one.hip).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_GPU_SCORE_CORE_H
#define M3IDX_GPU_SCORE_CORE_H

#include "device-math.h"

#define SCORE_THREADS 128

struct score_smem {
  float2 lut[256][16]; /* byte -> e2m1 of its low and high nibble */
};

M3IDX_DEV void fill_lut(score_smem &sm) {
  for (int i = threadIdx.x; i < 256 * 16; i += SCORE_THREADS) {
    int byte = i / 16;
    sm.lut[byte][i % 16] = make_float2(e2m1_f((uint32_t)byte & 15u), e2m1_f((uint32_t)byte >> 4));
  }
}

/* A lane's column of the table.  A lookup should cost a byte extraction,
 * one multiply-add for the address and the load; on NVIDIA the address is
 * kept as a shared-window offset, since nvcc otherwise rebuilds it as
 * ((byte * 16 + column) * 8 + base) in three instructions. */
#if defined(M3IDX_HIP_PLATFORM_NVIDIA)
typedef uint32_t lut_column;
M3IDX_DEV lut_column lut_column_of(const score_smem &sm) {
  return (uint32_t)__cvta_generic_to_shared(&sm.lut[0][threadIdx.x & 15u]);
}
M3IDX_DEV float2 lut_at(lut_column col, uint32_t byte) {
  float2 v;
  asm("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(col + (byte << 7)));
  return v;
}
#else
typedef const float2 *lut_column;
M3IDX_DEV lut_column lut_column_of(const score_smem &sm) { return &sm.lut[0][threadIdx.x & 15u]; }
M3IDX_DEV float2 lut_at(lut_column col, uint32_t byte) { return col[16u * byte]; }
#endif

/* Byte bb of w (bb a constant after unrolling). */
M3IDX_DEV uint32_t byte_of(uint32_t w, int bb) {
  return bb == 3 ? w >> 24 : __byte_perm(w, 0u, 0x4440u + (uint32_t)bb);
}

/* Query elements base .. base + 7 (base a multiple of 8) as fp32, exactly;
 * nonzero when one is beyond 2^125, where q * e2m1 may overflow and the
 * sums must round each product (no fma). */
M3IDX_DEV int query8(const gpu_call &c, long long base, float *v) {
  if (c.dtype == 1) {
    const uint4 x = *(const uint4 *)((const uint16_t *)c.query + base);
    const uint32_t w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
      v[2 * i] = bits_f(w[i] << 16);
      v[2 * i + 1] = bits_f(w[i] & 0xffff0000u);
    }
  } else {
    const uint2 x = *(const uint2 *)((const uint8_t *)c.query + base);
#pragma unroll
    for (int i = 0; i < 8; i++)
      v[i] = e4m3_f((uint8_t)((i < 4 ? x.x : x.y) >> (8 * (i % 4))));
  }
  int big = 0;
#pragma unroll
  for (int i = 0; i < 8; i++)
    big |= v[i] > 0x1p125f || v[i] < -0x1p125f;
  return big;
}

/* The 32 query elements of this lane's group, for one pair. */
M3IDX_DEV void load_query(const gpu_call &c, int row, int head, float *q32, int *unfused) {
  const long long base = ((long long)row * c.num_heads + head) * 128 + 32 * (threadIdx.x & 3);
  int big = 0;
#pragma unroll
  for (int i = 0; i < 4; i++)
    big |= query8(c, base + 8 * i, q32 + 8 * i);
  *unfused = big;
}

/* The eight e2m1 codes of a word (element i in bits 4i..4i+3) as fp32,
 * without a table: byte permutes pick each magnitude's two bf16 bytes
 * (0, 0.5, 1, 1.5, 2, 3, 4, 6 are bf16 values), then the sign is or'ed in.
 * Bit for bit what e2m1_f gives (prefill decodes its keys with it). */
M3IDX_DEV void e2m1_word(uint32_t w, float v[8]) {
  const uint32_t a = w & 0x77777777u, a2 = a >> 16;
  const uint32_t hi0 = __byte_perm(0x3f3f3f00u, 0x40404040u, a);
  const uint32_t lo0 = __byte_perm(0xc0800000u, 0xc0804000u, a);
  const uint32_t hi1 = __byte_perm(0x3f3f3f00u, 0x40404040u, a2);
  const uint32_t lo1 = __byte_perm(0xc0800000u, 0xc0804000u, a2);
  const uint32_t p[4] = {__byte_perm(lo0, hi0, 0x5140u), __byte_perm(lo0, hi0, 0x7362u),
                         __byte_perm(lo1, hi1, 0x5140u), __byte_perm(lo1, hi1, 0x7362u)};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    v[2 * i] = bits_f((p[i] << 16) | ((w << (28 - 8 * i)) & 0x80000000u));
    v[2 * i + 1] = bits_f((p[i] & 0xffff0000u) | ((w << (24 - 8 * i)) & 0x80000000u));
  }
}

/* Sum of one lane's 32 products, in element order (fma is exact unless a
 * product overflows; then each product is rounded first). */
template <bool FUSED>
M3IDX_DEV float group_sum(const score_smem &sm, const uint4 &d, const float *q32) {
  const lut_column col = lut_column_of(sm);
  const uint32_t w[4] = {d.x, d.y, d.z, d.w};
  float acc = 0.0f;
#pragma unroll
  for (int ww = 0; ww < 4; ww++)
#pragma unroll
    for (int bb = 0; bb < 4; bb++) {
      const float2 x = lut_at(col, byte_of(w[ww], bb));
      const float q0 = q32[8 * ww + 2 * bb], q1 = q32[8 * ww + 2 * bb + 1];
      acc = add_product<FUSED>(acc, q0, x.x);
      acc = add_product<FUSED>(acc, q1, x.y);
    }
  return acc;
}

/* Write the block score: the clamped maximum; an all-NaN block scores the
 * one quiet NaN 0x7fc00000 on every backend (on the integer bits, since
 * LLVM treats NaN payloads as unspecified and may fold a floating-point
 * `v != v ? NaN : v'). */
M3IDX_DEV void store_score(const gpu_call &c, int head, int row, int b, float best) {
  uint32_t u = f_bits(clamp_score(best));
  if ((u & 0x7fffffffu) > 0x7f800000u)
    u = 0x7fc00000u;
  ((uint32_t *)c.scores)[((long long)head * c.num_rows + row) * c.stride + b] = u;
}

#endif /* M3IDX_GPU_SCORE_CORE_H */
