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

/* Steps 3-5 of SPEC section 4 on 16 keys' four group sums.  Scale bytes
 * other than 0 and 255 are e << 23 as fp32 (a shift and a mask a group,
 * instead of scales16's six operations; the bytes are checked with dword
 * arithmetic, as AVX-512 BW in the target slows the multi-row path under
 * GCC 12).  Adding +0
 * makes a -0 logit +0 (fma(dot, scale, +0) would not: a negative product
 * too small for fp32 rounds to -0, the tiny_scale test pattern). */
TARGET static INLINE __m512 finish16(const uint8_t *page, int t0, const __m512 a[4], __m512 scale) {
  const __m512i s = _mm512_loadu_si512(page + M3IDX_PAGE_DATA_BYTES + 4 * t0);
  __m512 sg[4];
  const __m512i ones = _mm512_set1_epi32(0x01010101), highs = _mm512_set1_epi32((int)0x80808080u);
  const __m512i n = _mm512_xor_si512(s, _mm512_set1_epi32(-1));
  /* a byte 0 in s or in ~s (a byte 255 in s) sets its high bit here */
  const __m512i special = _mm512_or_si512(_mm512_andnot_si512(s, _mm512_sub_epi32(s, ones)),
                                          _mm512_andnot_si512(n, _mm512_sub_epi32(n, ones)));
  if (_mm512_test_epi32_mask(special, highs) == 0) {
    const __m512i ex = _mm512_set1_epi32(0x7f800000);
    const __m512i e[4] = {_mm512_slli_epi32(s, 23), _mm512_slli_epi32(s, 15),
                          _mm512_slli_epi32(s, 7), _mm512_srli_epi32(s, 1)};
    UNROLL
    for (int g = 0; g < 4; g++)
      sg[g] = _mm512_mul_ps(a[g], _mm512_castsi512_ps(_mm512_and_si512(e[g], ex)));
  } else {
    UNROLL
    for (int g = 0; g < 4; g++)
      sg[g] = _mm512_mul_ps(a[g], scales16(page, t0, g));
  }
  const __m512 d = _mm512_add_ps(_mm512_add_ps(sg[0], sg[1]), _mm512_add_ps(sg[2], sg[3]));
  return _mm512_add_ps(_mm512_mul_ps(d, scale), _mm512_setzero_ps());
}

/* The 32 keys of tile t0, transposed: x0[c] holds dword c (elements 8c ..
 * 8c + 7) of keys t0 .. t0 + 15, key t0 + k in lane k; x1[c] the same of
 * keys t0 + 16 .. t0 + 31. */
TARGET static INLINE void load_tile(const uint8_t *page, int t0, __m512i x0[16], __m512i x1[16]) {
  UNROLL
  for (int k = 0; k < 16; k++) {
    x0[k] = _mm512_loadu_si512(page + 64 * (t0 + k));
    x1[k] = _mm512_loadu_si512(page + 64 * (t0 + 16 + k));
  }
  transpose16(x0);
  transpose16(x1);
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
 * unrolled, GCC 12 gathers those prefetches together again (TUNING-NOTES). */
TARGET static INLINE void direct32_body(const uint8_t *page, int t0, const float *q,
                                        const char *steps, const int unfused, __m512 scale,
                                        __m512 *l0, __m512 *l1) {
  const __m512 lut = e2m1_lut();
  _Alignas(64) __m512i x0[16], x1[16];
  load_tile(page, t0, x0, x1);
  const __m512 z = _mm512_setzero_ps();
  __m512 a0[4] = {z, z, z, z}, a1[4] = {z, z, z, z};
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
 * in flight; the hardware prefetchers do not fill in for a reader that
 * computes between its loads.  Always inlined with the kernel's target:
 * GCC 12 left out the loop of a plain static inline one. */
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

#ifdef M3IDX_CPU_HAVE_AVX512_BF16
/* Two products an instruction (the avx512bf16 kernel, one-row pages, rows
 * with `pairs' set).  vdpbf16ps adds to each fp32 lane the product of the
 * high bf16 halves of its two operands' dwords and then that of the low
 * halves, each step rounded to nearest even: SPEC section 4's sum, two
 * elements at a time, when the high half holds the earlier element.  The
 * products are exact (bf16 and e2m1 values both have at most 8 significant
 * bits); the instruction flushes subnormal inputs and results to zero,
 * which a `pairs' row never meets (cpu.h, score.c).  Same tile, transpose
 * and prefetching as direct32_body; a dword c of 16 keys (elements 8c ..
 * 8c + 7, element 8c + m in bits 4m .. 4m + 3) gives four pairs p: one
 * vpmultishiftqb puts nibble 2p + 1 at the bottom of each dword's low word
 * and nibble 2p at the bottom of its high word, one vpermw looks both up
 * as bf16 (a table of the 16 values twice, as vpermw reads 5 index bits),
 * and one vdpbf16ps adds both products: 3 instructions for 32 products,
 * where direct32_body takes 6.  Checked against the scalar kernel before
 * it is picked (kernel-pick.c). */
#define TARGET_PAIRS __attribute__((target("avx512f,avx512bw,avx512vbmi,avx512bf16")))

/* The query as 64 dwords: dword i holds element 2i's bf16 bits in its high
 * half and element 2i + 1's in its low (the elements are bf16 or e4m3
 * values, so their fp32 bits end in 16 zeros). */
TARGET_PAIRS static __attribute__((noinline)) void query_pairs(const float *q, uint32_t qp[64]) {
  const __m512i pick = _mm512_set_epi16(61, 63, 57, 59, 53, 55, 49, 51, 45, 47, 41, 43, 37, 39,
                                        33, 35, 29, 31, 25, 27, 21, 23, 17, 19, 13, 15, 9, 11, 5,
                                        7, 1, 3);
  UNROLL
  for (int i = 0; i < 4; i++)
    _mm512_store_si512(qp + 16 * i,
                       _mm512_permutex2var_epi16(_mm512_loadu_si512(q + 32 * i), pick,
                                                 _mm512_loadu_si512(q + 32 * i + 16)));
}

TARGET_PAIRS static __attribute__((noinline)) void pairs32(const uint8_t *page, int t0,
                                                          const uint32_t *qp, const char *steps,
                                                          __m512 scale, __m512 *l0, __m512 *l1) {
  static const uint16_t bf16_of_e2m1[32] = {
      0x0000, 0x3f00, 0x3f80, 0x3fc0, 0x4000, 0x4040, 0x4080, 0x40c0,
      0x8000, 0xbf00, 0xbf80, 0xbfc0, 0xc000, 0xc040, 0xc080, 0xc0c0,
      0x0000, 0x3f00, 0x3f80, 0x3fc0, 0x4000, 0x4040, 0x4080, 0x40c0,
      0x8000, 0xbf00, 0xbf80, 0xbfc0, 0xc000, 0xc040, 0xc080, 0xc0c0};
  const __m512i table = _mm512_loadu_si512(bf16_of_e2m1);
  _Alignas(64) __m512i x0[16], x1[16];
  load_tile(page, t0, x0, x1);
  const __m512 z = _mm512_setzero_ps();
  __m512 a0[4] = {z, z, z, z}, a1[4] = {z, z, z, z};
  for (int jo = 0; jo < 4; jo++) { /* rolled, as in direct32_body */
    UNROLL
    for (int p = 0; p < 4; p++) {
      if (steps != NULL) {
        _mm_prefetch(steps + 128 * (4 * jo + p), _MM_HINT_T0);
        _mm_prefetch(steps + 128 * (4 * jo + p) + 64, _MM_HINT_T0);
      }
      /* bit offsets of the index bytes: nibble 2p + 1 into byte 0, 2p into
         byte 2 of each dword (the qword's second dword 32 bits on) */
      const uint64_t offsets = (uint64_t)(8 * p + 4) | (uint64_t)(8 * p) << 16 |
                               (uint64_t)(8 * p + 36) << 32 | (uint64_t)(8 * p + 32) << 48;
      const __m512i at = _mm512_set1_epi64((long long)offsets);
      UNROLL
      for (int g = 0; g < 4; g++) {
        const int c = 4 * g + jo;
        const __m512bh qb = (__m512bh)_mm512_set1_epi32((int)qp[4 * c + p]);
        const __m512i k0 = _mm512_permutexvar_epi16(_mm512_multishift_epi64_epi8(at, x0[c]), table);
        const __m512i k1 = _mm512_permutexvar_epi16(_mm512_multishift_epi64_epi8(at, x1[c]), table);
        a0[g] = _mm512_dpbf16_ps(a0[g], (__m512bh)k0, qb);
        a1[g] = _mm512_dpbf16_ps(a1[g], (__m512bh)k1, qb);
      }
    }
  }
  *l0 = finish16(page, t0, a0, scale);
  *l1 = finish16(page, t0 + 16, a1, scale);
}
#endif

TARGET static INLINE void page_scores(const uint8_t *page, const uint8_t *next,
                                      const struct m3idx_cpu_row *rows, int nrows, float scale,
                                      int with_pairs) {
  _Alignas(64) float kt[M3IDX_HEAD_DIM][TILE];
  _Alignas(64) float sc[4][TILE];
  struct m3idx_cpu_maxima m;
  int kmax = m3idx__cpu_maxima_start(&m, rows, nrows);
  const __m512 vscale = _mm512_set1_ps(scale);
  const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
  if (nrows == 1) {
#ifdef M3IDX_CPU_HAVE_AVX512_BF16
    _Alignas(64) uint32_t qp[64];
    const int paired = with_pairs && rows[0].pairs;
    if (paired)
      query_pairs(rows[0].q, qp);
#endif
    /* The page's maximum, lane by lane, reduced once at its end rather
       than a tile (fewer reductions).  Lanes take only non-NaN logits, so
       vmaxps never meets a NaN; -0 logits are +0 already. */
    __m512 best = ninf;
    __mmask16 seen = 0;
    for (int t0 = 0; t0 < kmax; t0 += TILE) {
      const char *steps = prefetch_tile(page, next, t0, kmax, TILE);
      __m512 l0, l1;
#ifdef M3IDX_CPU_HAVE_AVX512_BF16
      if (paired)
        pairs32(page, t0, qp, steps, vscale, &l0, &l1);
      else
#endif
      if (rows[0].unfused)
        direct32_unfused(page, t0, rows[0].q, steps, vscale, &l0, &l1);
      else
        direct32_fused(page, t0, rows[0].q, steps, vscale, &l0, &l1);
      __mmask16 ok0 = _mm512_mask_cmp_ps_mask(first_lanes(kmax - t0), l0, l0, _CMP_ORD_Q);
      __mmask16 ok1 = _mm512_mask_cmp_ps_mask(first_lanes(kmax - t0 - 16), l1, l1, _CMP_ORD_Q);
      best = _mm512_mask_max_ps(best, ok0, best, l0);
      best = _mm512_mask_max_ps(best, ok1, best, l1);
      seen |= ok0 | ok1;
    }
    if (seen)
      m3idx__cpu_maxima_take(&m, 0, _mm512_reduce_max_ps(best));
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

TARGET void m3idx__cpu_page_scores_avx512(const uint8_t *page, const uint8_t *next,
                                          const struct m3idx_cpu_row *rows,
                                          int nrows, float scale) {
  page_scores(page, next, rows, nrows, scale, 0);
}

#ifdef M3IDX_CPU_HAVE_AVX512_BF16
TARGET void m3idx__cpu_page_scores_avx512bf16(const uint8_t *page, const uint8_t *next,
                                              const struct m3idx_cpu_row *rows,
                                              int nrows, float scale) {
  page_scores(page, next, rows, nrows, scale, 1);
}
#endif
#endif /* M3IDX_CPU_HAVE_AVX512 */
