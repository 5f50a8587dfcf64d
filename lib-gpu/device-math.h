/*
 * device-math.h - what the kernels share besides SPEC's bit rules (which
 * are lib/spec-rules.h, the host's own): the score store, and the row
 * geometry with its checks of the contents they read.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_GPU_DEVICE_MATH_H
#define M3IDX_GPU_DEVICE_MATH_H

#include "kernels.h"
#include "spec-rules.h"
#include "work-map.h"

#define M3IDX_DEV __device__ __forceinline__

M3IDX_DEV float bits_f(uint32_t u) { return __uint_as_float(u); }
M3IDX_DEV uint32_t f_bits(float f) { return __float_as_uint(f); }
M3IDX_DEV float nan_f() { return __uint_as_float(M3IDX_NAN_BITS); }

/* A code word as the broken path reads it: each byte's nibbles swapped. */
template <int P> M3IDX_DEV uint32_t path_word(uint32_t w) {
  if (P == M3IDX_GPU_PATH_FAST_BROKEN)
    return ((w >> 4) & 0x0f0f0f0fu) | ((w & 0x0f0f0f0fu) << 4);
  return w;
}

/* Write the block score: clamped (SPEC section 6); an all-NaN block
 * scores the one quiet NaN 0x7fc00000 on every backend (on the integer
 * bits, since LLVM treats NaN payloads as unspecified and may fold a
 * floating-point `v != v ? NaN : v'). */
M3IDX_DEV void store_score(const gpu_call &c, int head, int row, int b, float best) {
  uint32_t u = f_bits(m3idx__clamp(best));
  if ((u & 0x7fffffffu) > 0x7f800000u)
    u = M3IDX_NAN_BITS;
  ((uint32_t *)c.scores)[((long long)head * c.num_rows + row) * c.score_stride + b] = u;
}

/* A decode request's length is valid: it holds the query rows and fits
 * max_seq_len.  The host checks the same, but a captured graph replays
 * with seq_lens it never saw. */
M3IDX_DEV bool decode_len_ok(const gpu_call &c, int len) {
  return len >= c.query_len && len <= c.max_seq_len;
}

/* Position of a row; -1 (and a bit in *err) when its request's lengths
 * are invalid.  *req receives the request. */
M3IDX_DEV int row_position(const gpu_call &c, int row, int *req) {
  if (c.mode == M3IDX_MODE_DECODE) {
    int r = row / c.query_len;
    int s = c.seq_lens[r];
    *req = r;
    if (!decode_len_ok(c, s)) {
      atomicOr(c.err, M3IDX_GPU_BAD_SEQ_LENS);
      return -1;
    }
    return s - c.query_len + row % c.query_len;
  }
  /* Prefill: the row's request (when cu is not monotone, the checks
     below fail). */
  const int32_t *cu = c.cu_seqlens_q;
  const int lo = m3idx__request_at(cu, c.num_reqs, row);
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
  return c.pages + (long long)id * M3IDX_PAGE_BYTES;
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
  if (!decode_len_ok(c, len)) {
    if (threadIdx.x == 0)
      atomicOr(c.err, M3IDX_GPU_BAD_SEQ_LENS);
    return -1;
  }
  const int first = m3idx__work_first(w), n = m3idx__work_count(w);
  if (n < 1 || first + n > m3idx__blocks_of(len)) {
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
