/*
 * device-math.h - SPEC section 4 on the GPU: exact element decoding, the
 * NaN-ignoring maximum, clamping, and the row geometry with its checks.
 * Included by the kernels only; the logit's sums are in score-core.h.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_GPU_DEVICE_MATH_H
#define M3IDX_GPU_DEVICE_MATH_H

#include "kernels.h"
#include "work-map.h"

#define M3IDX_DEV __device__ __forceinline__

M3IDX_DEV float bits_f(uint32_t u) { return __uint_as_float(u); }
M3IDX_DEV uint32_t f_bits(float f) { return __float_as_uint(f); }
M3IDX_DEV float nan_f() { return __uint_as_float(0x7fc00000u); }

/* e2m1 code (low 4 bits) as fp32, built from bits: sign, then
 * x = 0 -> 0, x = 1 -> 0.5, x >= 2 -> (x << 22) + 2^-1's bits. */
M3IDX_DEV float e2m1_f(uint32_t code) {
  uint32_t x = code & 7u;
  uint32_t mag = x >= 2u ? (x << 22) + 0x3f000000u : (x ? 0x3f000000u : 0u);
  return bits_f(((code & 8u) << 28) | mag);
}

M3IDX_DEV float e8m0_f(uint32_t e) {
  return bits_f(e == 255u ? 0x7fc00000u : e == 0u ? 0x00400000u : e << 23);
}

M3IDX_DEV float e4m3_f(uint8_t x) {
  uint32_t sign = (uint32_t)(x >> 7) << 31, e = (x >> 3) & 15u, m = x & 7u;
  if (e == 15u && m == 7u)
    return bits_f(sign | 0x7fc00000u);
  if (e == 0u) {
    float v = (float)m * 0x1p-9f;
    return sign ? -v : v;
  }
  return bits_f(sign | ((e + 120u) << 23) | (m << 20));
}

/* One step of SPEC section 4's in-order sum: acc + q * k.  The product
 * of a query element and an e2m1 value is exact in fp32 unless it
 * overflows, so a fused multiply-add rounds like the sum of the product
 * (FUSED); a call whose query has an element beyond 2^125 rounds each
 * product first (no fma). */
template <bool FUSED> M3IDX_DEV float add_product(float acc, float q, float k) {
  if (FUSED)
    return fmaf(q, k, acc);
  const float p = q * k;
  return acc + p;
}

/* SPEC section 6's clamp, on the bits: positive floats order like their
 * bits, and NaN (any payload) and negative values pass unchanged.  A float
 * select would let the compiler turn it into a min that rewrites NaNs. */
M3IDX_DEV float clamp_score(float x) {
  uint32_t u = f_bits(x);
  if (u > 0x6fa18f07u && u <= 0x7f800000u)
    u = 0x6fa18f07u;
  return bits_f(u);
}

/* Position of a row; -1 (and a bit in *err) when its request's lengths
 * are invalid.  *req receives the request. */
M3IDX_DEV int row_position(const gpu_call &c, int row, int *req) {
  if (c.mode == 1) {
    int r = row / c.query_len;
    int s = c.seq_lens[r];
    *req = r;
    if (s < c.query_len || s > c.max_seq_len) {
      atomicOr(c.err, M3IDX_GPU_BAD_SEQ_LENS);
      return -1;
    }
    return s - c.query_len + row % c.query_len;
  }
  /* Prefill: the last r with cu[r] <= row (cu is read in bounds even when
     it is not monotone; the checks below then fail). */
  const int32_t *cu = c.cu_seqlens_q;
  int lo = 0, hi = c.num_reqs - 1;
  while (lo < hi) {
    int mid = lo + (hi - lo + 1) / 2;
    if (cu[mid] <= row)
      lo = mid;
    else
      hi = mid - 1;
  }
  *req = lo;
  int start = cu[lo], end = cu[lo + 1], ctx = c.context_lens[lo], s = c.seq_lens[lo];
  if (cu[0] != 0 || cu[c.num_reqs] != c.num_rows || start > row || row >= end || ctx < 0 ||
      (long long)ctx + (end - start) != s || s > c.max_seq_len) {
    atomicOr(c.err, M3IDX_GPU_BAD_PREFILL);
    return -1;
  }
  return ctx + (row - start);
}

/* Block b's page id in request r's row of the block table, or -1 when b
 * is past the row's end (r must be a request of the call). */
M3IDX_DEV int block_table_at(const gpu_call &c, int r, int b) {
  return b < c.bt_stride ? c.block_table[(long long)r * c.bt_stride + b] : -1;
}

/* Page `id', or NULL (and a bit in *err) when there is no such page. */
M3IDX_DEV const uint8_t *page_with_id(const gpu_call &c, int id) {
  if (id < 0 || id >= c.num_pages) {
    atomicOr(c.err, M3IDX_GPU_BAD_PAGE_ID);
    return nullptr;
  }
  return c.pages + (long long)id * 8704;
}

/* The page of block b of request r, or NULL (and a bit in *err). */
M3IDX_DEV const uint8_t *page_of(const gpu_call &c, int r, int b) {
  return page_with_id(c, block_table_at(c, r, b));
}

/* Work-map entry e (SPEC section 9): its request *r, that request's
 * seq_len *s and block range [*b0, *b0 + *count).  0 for an unused entry;
 * -1 (and a bit in *err, from one thread) for one not of this batch. */
M3IDX_DEV int map_entry(const gpu_call &c, const int32_t *map, int e, int *r, int *s, int *b0,
                        int *count) {
  const int req = map[2 * e], w = map[2 * e + 1];
  if (req == -1)
    return 0;
  if (req < 0 || req >= c.num_reqs) {
    if (threadIdx.x == 0)
      atomicOr(c.err, M3IDX_GPU_BAD_WORK_MAP);
    return -1;
  }
  const int len = c.seq_lens[req];
  if (len < c.query_len || len > c.max_seq_len) {
    if (threadIdx.x == 0)
      atomicOr(c.err, M3IDX_GPU_BAD_SEQ_LENS);
    return -1;
  }
  const int first = w & M3IDX_WORK_FIRST_MASK, n = w >> M3IDX_WORK_COUNT_SHIFT;
  if (n < 1 || first + n > (len + 127) / 128) {
    if (threadIdx.x == 0)
      atomicOr(c.err, M3IDX_GPU_BAD_WORK_MAP);
    return -1;
  }
  *r = req;
  *s = len;
  *b0 = first;
  *count = n;
  return 1;
}

#endif /* M3IDX_GPU_DEVICE_MATH_H */
