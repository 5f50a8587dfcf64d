/*
 * page-kernel-avx512.c - the page kernel with AVX-512F: one SIMD lane per
 * key, so each lane runs SPEC section 4's sums in element order.
 *
 * A tile of 32 keys is decoded once into fp32, transposed so that element
 * d of the 32 keys is two vectors (kt[d]); every row then streams the tile
 * with fused multiply-adds.  The products q[d] * e2m1 are exact in fp32
 * unless they overflow, so fma(q, k, acc) rounds exactly like acc + q * k
 * for every row whose |q| <= 2^125; rows with larger elements (flagged
 * `unfused') round each product, as SPEC section 4 defines.  The bits
 * equal the scalar kernel's.  Chosen at run time (kernel-pick.c).
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include "cpu.h"

#ifdef M3IDX_CPU_HAVE_AVX512
#include <immintrin.h>

#include "formats.h"

#define TARGET __attribute__((target("avx512f")))
#define INLINE __attribute__((always_inline)) inline
/* Every fixed loop below is unrolled, so that the sums stay in registers. */
#define UNROLL _Pragma("GCC unroll 32")
#define TILE 32

/* Transpose 16 rows of 16 dwords in place: afterwards x[c] holds dword c
 * of rows 0..15 (row k in lane k). */
TARGET static INLINE void transpose16(__m512i x[16]) {
  __m512i a[16], b[16];
  UNROLL
  for (int i = 0; i < 8; i++) {
    a[2 * i] = _mm512_unpacklo_epi32(x[2 * i], x[2 * i + 1]);
    a[2 * i + 1] = _mm512_unpackhi_epi32(x[2 * i], x[2 * i + 1]);
  }
  UNROLL
  for (int i = 0; i < 4; i++) {
    b[4 * i + 0] = _mm512_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
    b[4 * i + 1] = _mm512_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
    b[4 * i + 2] = _mm512_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
    b[4 * i + 3] = _mm512_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
  }
  /* b[4i + m], 128-bit lane L: column 4L + m of rows 4i..4i+3. */
  UNROLL
  for (int m = 0; m < 4; m++) {
    __m512i lo01 = _mm512_shuffle_i32x4(b[m], b[4 + m], 0x44);
    __m512i hi01 = _mm512_shuffle_i32x4(b[m], b[4 + m], 0xee);
    __m512i lo23 = _mm512_shuffle_i32x4(b[8 + m], b[12 + m], 0x44);
    __m512i hi23 = _mm512_shuffle_i32x4(b[8 + m], b[12 + m], 0xee);
    x[0 + m] = _mm512_shuffle_i32x4(lo01, lo23, 0x88);
    x[4 + m] = _mm512_shuffle_i32x4(lo01, lo23, 0xdd);
    x[8 + m] = _mm512_shuffle_i32x4(hi01, hi23, 0x88);
    x[12 + m] = _mm512_shuffle_i32x4(hi01, hi23, 0xdd);
  }
}

/* The 16 e2m1 values, as a vpermps table. */
TARGET static INLINE __m512 e2m1_lut(void) {
  static const uint32_t e2m1_bits[16] = M3IDX__E2M1_BITS_INIT;
  return _mm512_castsi512_ps(_mm512_loadu_si512(e2m1_bits));
}

/* The e8m0 scales of 16 keys as fp32, group g. */
TARGET static INLINE __m512 scales16(const uint8_t *page, int t0, int g) {
  const __m512i ff = _mm512_set1_epi32(0xff);
  __m512i s = _mm512_loadu_si512(page + M3IDX_PAGE_DATA_BYTES + 4 * t0);
  __m512i e = _mm512_and_si512(_mm512_srli_epi32(s, 8 * g), ff);
  __m512i f = _mm512_slli_epi32(e, 23);
  f = _mm512_mask_mov_epi32(f, _mm512_cmpeq_epi32_mask(e, _mm512_setzero_si512()),
                            _mm512_set1_epi32(0x00400000));
  f = _mm512_mask_mov_epi32(f, _mm512_cmpeq_epi32_mask(e, ff), _mm512_set1_epi32(0x7fc00000));
  return _mm512_castsi512_ps(f);
}

/* Decode keys [t0, t0 + 16) into kt[d][half*16 ..] and sc[g][half*16 ..]. */
TARGET static INLINE void decode16(const uint8_t *page, int t0, int half,
                            float (*kt)[TILE], float (*sc)[TILE]) {
  const __m512 lut = e2m1_lut();
  __m512i x[16];
  UNROLL
  for (int k = 0; k < 16; k++)
    x[k] = _mm512_loadu_si512(page + 64 * (t0 + k));
  transpose16(x);
  /* Dword c of a key holds elements 8c..8c+7, element 8c+m in bits 4m..4m+3;
     vpermps reads only the low 4 bits of each index. */
  UNROLL
  for (int c = 0; c < 16; c++)
    UNROLL
    for (int m = 0; m < 8; m++) {
      __m512i idx = _mm512_srli_epi32(x[c], 4 * m);
      _mm512_store_ps(&kt[8 * c + m][16 * half], _mm512_permutexvar_ps(idx, lut));
    }
  UNROLL
  for (int g = 0; g < 4; g++)
    _mm512_store_ps(&sc[g][16 * half], scales16(page, t0, g));
}

/* Logits of one row against the 32 keys of the tile. */
TARGET static INLINE void row_logits(const float *q, int unfused,
                                     float (*kt)[TILE], float (*sc)[TILE],
                                     __m512 scale, __m512 *l0, __m512 *l1) {
  __m512 a0[4], a1[4];
  UNROLL
  for (int g = 0; g < 4; g++) {
    a0[g] = _mm512_setzero_ps();
    a1[g] = _mm512_setzero_ps();
  }
  if (!unfused) {
    UNROLL
    for (int j = 0; j < 32; j++)
      UNROLL
      for (int g = 0; g < 4; g++) {
        __m512 qb = _mm512_set1_ps(q[32 * g + j]);
        a0[g] = _mm512_fmadd_ps(qb, _mm512_load_ps(&kt[32 * g + j][0]), a0[g]);
        a1[g] = _mm512_fmadd_ps(qb, _mm512_load_ps(&kt[32 * g + j][16]), a1[g]);
      }
  } else {
    UNROLL
    for (int j = 0; j < 32; j++)
      UNROLL
      for (int g = 0; g < 4; g++) {
        __m512 qb = _mm512_set1_ps(q[32 * g + j]);
        a0[g] = _mm512_add_ps(a0[g], _mm512_mul_ps(qb, _mm512_load_ps(&kt[32 * g + j][0])));
        a1[g] = _mm512_add_ps(a1[g], _mm512_mul_ps(qb, _mm512_load_ps(&kt[32 * g + j][16])));
      }
  }
  __m512 s0[4], s1[4];
  UNROLL
  for (int g = 0; g < 4; g++) {
    s0[g] = _mm512_mul_ps(a0[g], _mm512_load_ps(&sc[g][0]));
    s1[g] = _mm512_mul_ps(a1[g], _mm512_load_ps(&sc[g][16]));
  }
  __m512 d0 = _mm512_add_ps(_mm512_add_ps(s0[0], s0[1]), _mm512_add_ps(s0[2], s0[3]));
  __m512 d1 = _mm512_add_ps(_mm512_add_ps(s1[0], s1[1]), _mm512_add_ps(s1[2], s1[3]));
  d0 = _mm512_mul_ps(d0, scale);
  d1 = _mm512_mul_ps(d1, scale);
  /* -0 counts as +0. */
  const __m512 zero = _mm512_setzero_ps();
  *l0 = _mm512_mask_mov_ps(d0, _mm512_cmp_ps_mask(d0, zero, _CMP_EQ_OQ), zero);
  *l1 = _mm512_mask_mov_ps(d1, _mm512_cmp_ps_mask(d1, zero, _CMP_EQ_OQ), zero);
}

/* Steps 3-5 of SPEC section 4 on 16 keys' four group sums. */
TARGET static INLINE __m512 finish16(const uint8_t *page, int t0, const __m512 a[4], __m512 scale) {
  __m512 sg[4];
  UNROLL
  for (int g = 0; g < 4; g++)
    sg[g] = _mm512_mul_ps(a[g], scales16(page, t0, g));
  __m512 d = _mm512_mul_ps(_mm512_add_ps(_mm512_add_ps(sg[0], sg[1]), _mm512_add_ps(sg[2], sg[3])),
                           scale);
  const __m512 zero = _mm512_setzero_ps();
  return _mm512_mask_mov_ps(d, _mm512_cmp_ps_mask(d, zero, _CMP_EQ_OQ), zero);
}

/* One row against 32 keys straight from the page, without the fp32 tile:
 * the path when a page has a single row (decode, one head).  Eight sums
 * (4 groups x 2 halves) run interleaved, element order kept in each; the
 * eight words of an octet of elements are taken into registers once, and
 * the query is broadcast from memory where it is used (a function of its
 * own, so that the compiler does not hoist 128 broadcasts out of the
 * caller's loop and spill the sums to make room for them).  Each of the
 * 32 steps (element octet, element) prefetches one line of `steps' when
 * it is not NULL (see prefetch_tile).  The loop over octets stays rolled:
 * unrolled, GCC 12 gathers those prefetches together again (9.5 against
 * 7.6 TSC cycles a key over pages from memory, though 5.4 against 5.5
 * over pages in cache). */
TARGET static INLINE void direct32_body(const uint8_t *page, int t0, const float *q,
                                        const char *steps, const int unfused, __m512 scale,
                                        __m512 *l0, __m512 *l1) {
  const __m512 lut = e2m1_lut();
  _Alignas(64) __m512i x0[16], x1[16];
  UNROLL
  for (int k = 0; k < 16; k++) {
    x0[k] = _mm512_loadu_si512(page + 64 * (t0 + k));
    x1[k] = _mm512_loadu_si512(page + 64 * (t0 + 16 + k));
  }
  transpose16(x0);
  transpose16(x1);
  __m512 a0[4], a1[4];
  UNROLL
  for (int g = 0; g < 4; g++) {
    a0[g] = _mm512_setzero_ps();
    a1[g] = _mm512_setzero_ps();
  }
  for (int jo = 0; jo < 4; jo++) {
    __m512i w0[4], w1[4]; /* elements 32g + 8jo .. 32g + 8jo + 7 of the 32 keys */
    UNROLL
    for (int g = 0; g < 4; g++) {
      w0[g] = x0[4 * g + jo];
      w1[g] = x1[4 * g + jo];
    }
    UNROLL
    for (int jj = 0; jj < 8; jj++) {
      if (steps != NULL)
        _mm_prefetch(steps + 64 * (8 * jo + jj), _MM_HINT_T0);
      UNROLL
      for (int g = 0; g < 4; g++) {
        const __m512 qb = _mm512_set1_ps(q[32 * g + 8 * jo + jj]);
        const __m512 k0 = _mm512_permutexvar_ps(_mm512_srli_epi32(w0[g], 4 * jj), lut);
        const __m512 k1 = _mm512_permutexvar_ps(_mm512_srli_epi32(w1[g], 4 * jj), lut);
        if (!unfused) {
          a0[g] = _mm512_fmadd_ps(qb, k0, a0[g]);
          a1[g] = _mm512_fmadd_ps(qb, k1, a1[g]);
        } else {
          a0[g] = _mm512_add_ps(a0[g], _mm512_mul_ps(qb, k0));
          a1[g] = _mm512_add_ps(a1[g], _mm512_mul_ps(qb, k1));
        }
      }
    }
  }
  *l0 = finish16(page, t0, a0, scale);
  *l1 = finish16(page, t0 + 16, a1, scale);
}

TARGET static __attribute__((noinline)) void direct32_fused(const uint8_t *page, int t0,
                                                            const float *q, const char *steps,
                                                            __m512 scale, __m512 *l0,
                                                            __m512 *l1) {
  direct32_body(page, t0, q, steps, 0, scale, l0, l1);
}

TARGET static __attribute__((noinline)) void direct32_unfused(const uint8_t *page, int t0,
                                                              const float *q, const char *steps,
                                                              __m512 scale, __m512 *l0,
                                                              __m512 *l1) {
  direct32_body(page, t0, q, steps, 1, scale, l0, l1);
}

/* The prefetches of tile t0: with a next page, a quarter of its lines
 * (its share), so that the whole next page is on its way while this one
 * is scored, and this page, having come as the last one's next, needs
 * none; without, this page's next tile.  The last `stepped' lines of the
 * share are left to the caller, which takes one a step of its loop over
 * elements (direct32_body): a burst of 34 prefetches, we take it, holds
 * up the sums while it waits for room among the few misses a core keeps
 * in flight.  On the 2-core VM of the bench figures, decode 8 x 128K,
 * one (row, head) a request, same build and run: 26.6-31.0 GB/s with the
 * whole share at the tile's start, 33.3-36.5 stepped; 23.1 with the first
 * 2 KB of the next page at once (an earlier session).  Measured and
 * dropped (one thread, 8192 pages in shuffled order, against the share at
 * the tile's start, 8.8-9.4 TSC cycles a key, where stepped took 7.2-7.6):
 * the share spread over the tile's four octets and the page after next
 * into L2 besides (no gain); the share with the NTA hint (the same); into
 * L2 (T1 or T2) with this page's next tile into L1, 10.6-12.7; every 4th
 * or 16th line of the next page, leaving the rest to the hardware
 * prefetchers, 10.9-14.6; only this page's next tile 11.7-12.1; none
 * 18.5-18.9: the hardware prefetchers do not fill in for a reader that
 * computes between its loads.  Always inlined with the kernel's target:
 * GCC 12 left out the loop of a plain static inline one (seen in the
 * assembly). */
_Static_assert(4 * TILE == M3IDX_BLOCK_SIZE && M3IDX_PAGE_BYTES % (4 * 64) == 0,
               "four shares of whole lines");
_Static_assert(TILE <= M3IDX_PAGE_BYTES / 4 / 64, "a line of the share for each of a tile's steps");
TARGET static INLINE const char *prefetch_tile(const uint8_t *page, const uint8_t *next,
                                                int t0, int kmax, int stepped) {
  if (next != NULL) {
    const char *p = (const char *)next + (M3IDX_PAGE_BYTES / 4) * (t0 / TILE);
    const int now = M3IDX_PAGE_BYTES / 4 - 64 * stepped;
    for (int i = 0; i < now; i += 64)
      _mm_prefetch(p + i, _MM_HINT_T0);
    return stepped ? p + now : NULL;
  }
  if (t0 + TILE < kmax)
    for (int k = 0; k < TILE; k++)
      _mm_prefetch((const char *)page + 64 * (t0 + TILE + k), _MM_HINT_T0);
  return NULL;
}

static inline __mmask16 first_lanes(int n) {
  return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1u);
}

TARGET void m3idx__cpu_page_scores_avx512(const uint8_t *page, const uint8_t *next,
                                          const struct m3idx_cpu_row *rows,
                                          int nrows, float scale) {
  _Alignas(64) float kt[M3IDX_HEAD_DIM][TILE];
  _Alignas(64) float sc[4][TILE];
  struct m3idx_cpu_maxima m;
  int kmax = m3idx__cpu_maxima_start(&m, rows, nrows);
  const __m512 vscale = _mm512_set1_ps(scale);
  const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
  if (nrows == 1) {
    for (int t0 = 0; t0 < kmax; t0 += TILE) {
      const char *steps = prefetch_tile(page, next, t0, kmax, TILE);
      __m512 l0, l1;
      if (rows[0].unfused)
        direct32_unfused(page, t0, rows[0].q, steps, vscale, &l0, &l1);
      else
        direct32_fused(page, t0, rows[0].q, steps, vscale, &l0, &l1);
      __mmask16 ok0 = _mm512_mask_cmp_ps_mask(first_lanes(kmax - t0), l0, l0, _CMP_ORD_Q);
      __mmask16 ok1 = _mm512_mask_cmp_ps_mask(first_lanes(kmax - t0 - 16), l1, l1, _CMP_ORD_Q);
      if ((ok0 | ok1) == 0)
        continue;
      m3idx__cpu_maxima_take(&m, 0, _mm512_reduce_max_ps(_mm512_max_ps(
                                        _mm512_mask_mov_ps(ninf, ok0, l0),
                                        _mm512_mask_mov_ps(ninf, ok1, l1))));
    }
    m3idx__cpu_maxima_store(&m, rows, 1);
    return;
  }
  for (int t0 = 0; t0 < kmax; t0 += TILE) {
    prefetch_tile(page, next, t0, kmax, 0);
    /* Both halves, always: keys past kmax are masked out below. */
    decode16(page, t0, 0, kt, sc);
    decode16(page, t0 + 16, 1, kt, sc);
    for (int r = 0; r < nrows; r++) {
      int valid = rows[r].nkeys - t0;
      if (valid <= 0)
        continue;
      __m512 l0, l1;
      row_logits(rows[r].q, rows[r].unfused, kt, sc, vscale, &l0, &l1);
      __mmask16 ok0 = _mm512_mask_cmp_ps_mask(first_lanes(valid), l0, l0, _CMP_ORD_Q);
      __mmask16 ok1 = _mm512_mask_cmp_ps_mask(first_lanes(valid - 16), l1, l1, _CMP_ORD_Q);
      if ((ok0 | ok1) == 0)
        continue; /* only NaN logits here */
      __m512 mx = _mm512_max_ps(_mm512_mask_mov_ps(ninf, ok0, l0),
                                _mm512_mask_mov_ps(ninf, ok1, l1));
      m3idx__cpu_maxima_take(&m, r, _mm512_reduce_max_ps(mx));
    }
  }
  m3idx__cpu_maxima_store(&m, rows, nrows);
}
#endif /* M3IDX_CPU_HAVE_AVX512 */
