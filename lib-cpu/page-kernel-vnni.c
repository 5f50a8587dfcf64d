/*
 * page-kernel-vnni.c - the page kernel of AVX-512 VNNI processors: a
 * filter with a proven error bound, then the exact score of the keys that
 * pass it.  SPEC section 4 rounds once, and rounding is monotone, so a
 * block's score is the rounding of its largest D (the smallest for a
 * negative scale); only the keys that could hold that D need an exact sum.
 *
 * The filter: each row is cut to integers of 15 bits in two signed 8-bit
 * digit planes (row-digits.c); a tile of 16 keys is transposed within
 * 128-bit blocks so that each lane holds one group of one key, its e2m1
 * codes decoded to unsigned bytes (the value in halves, plus 12);
 * vpdpbusd then sums each group's integer products exactly, 64 an
 * instruction, and the four group sums, each shifted right by its scale's
 * distance below the page's largest, add up to A, an integer within
 * M3IDX_CUT_ERROR units of the key's D (lib/filter-cut.h).  The keys
 * whose A is within M3IDX_CUT_MARGIN of the row's largest are scored
 * exactly (take_key); no other key can hold the block's largest D.
 * Their D comes from the same cut where fp64 holds it (key_d_cut): the
 * key's group sums of Q again, plus the products of the few elements
 * whose Q dropped low bits.
 *
 * A page of ONE_PLANE_ROWS rows or more is filtered on one 8-bit plane
 * first (half the vpdpbusd a row), against a bound B of each key that
 * the rows share (from its codes' magnitudes, once a tile); the few keys
 * within it get their A from their own bytes (key_a) and then A's test.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include "cpu.h"

#ifdef M3IDX_CPU_HAVE_AVX512
#include <immintrin.h>

#include "filter-cut.h"
#include "page-prefetch.h"
#include "spec-rules.h"

/* page-kernel-vnni-vbmi.c builds this file again with AVX-512 VBMI. */
#ifdef M3IDX_VNNI_VBMI
#define TARGET __attribute__((target("avx512f,avx512bw,avx512vnni,bmi2,avx512vbmi")))
#define KERNEL m3idx__cpu_page_scores_vnni_vbmi
#else
#define TARGET __attribute__((target("avx512f,avx512bw,avx512vnni,bmi2")))
#define KERNEL m3idx__cpu_page_scores_vnni
#endif
#define INLINE inline __attribute__((always_inline))

/* e2m1 code -> value in halves + M3IDX_CUT_CODE_BIAS: 0, 1, 2, 3, 4, 6, 8,
 * 12, then negated (unsigned bytes for vpdpbusd; the rows' bias undoes it). */
#define CODE_BYTES 12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0

/* table16's byte for each of x's low nibbles (high 0) or high nibbles
 * (high 1).  With VBMI, vpermb reads six index bits of a table that
 * repeats every 16 bytes, so the neighbouring bits need no mask. */
TARGET static INLINE __m512i nibble_lookup(__m128i table16, __m512i x, int high) {
  const __m512i table = _mm512_broadcast_i32x4(table16);
  const __m512i idx = high ? _mm512_srli_epi16(x, 4) : x;
#ifdef M3IDX_VNNI_VBMI
  return _mm512_permutexvar_epi8(idx, table);
#else
  return _mm512_shuffle_epi8(table, _mm512_and_si512(idx, _mm512_set1_epi8(15)));
#endif
}

/* The code bytes of x's low nibbles (high 0) or high nibbles (high 1). */
TARGET static INLINE __m512i code_bytes(__m512i x, int high) {
  return nibble_lookup(_mm_setr_epi8(CODE_BYTES), x, high);
}

/* |value in halves| of an e2m1 code's magnitude bits m (0 .. 7). */
#define HALVES_OF(m) ((m) < 5 ? (m) : (m) == 5 ? 6 : (m) == 6 ? 8 : 12)
#define PAIR(i) (HALVES_OF((i) & 7) + HALVES_OF(((i) >> 4) & 7))
#define PAIRS4(i) PAIR(i), PAIR(i + 1), PAIR(i + 2), PAIR(i + 3)
#define PAIRS16(i) PAIRS4(i), PAIRS4(i + 4), PAIRS4(i + 8), PAIRS4(i + 12)

/* The |halves| of each byte's two codes, added (0 .. 24). */
TARGET static INLINE __m512i pair_magnitudes(__m512i x) {
#ifdef M3IDX_VNNI_VBMI
  /* byte i: PAIR(i) for the seven bits vpermt2b reads; bit 3 (the low
   * code's sign) does not change it, bit 7 (the high code's) is not read */
  static const uint8_t table[128] __attribute__((aligned(64))) = {
      PAIRS16(0), PAIRS16(16), PAIRS16(32), PAIRS16(48),
      PAIRS16(64), PAIRS16(80), PAIRS16(96), PAIRS16(112)};
  return _mm512_permutex2var_epi8(_mm512_load_si512(table), x, _mm512_load_si512(table + 64));
#else
  const __m128i m = _mm_setr_epi8(PAIRS16(0)); /* PAIR(i), i < 16: code i's own |halves| */
  return _mm512_add_epi8(nibble_lookup(m, x, 0), nibble_lookup(m, x, 1));
#endif
}

/* Lane j of the result: key j's sum over the four blocks of t[j / 4]. */
TARGET static INLINE __m512i add_blocks(const __m512i t[4]) {
  const __m512i t01 = _mm512_add_epi32(_mm512_shuffle_i32x4(t[0], t[1], 0x44),
                                       _mm512_shuffle_i32x4(t[0], t[1], 0xee));
  const __m512i t23 = _mm512_add_epi32(_mm512_shuffle_i32x4(t[2], t[3], 0x44),
                                       _mm512_shuffle_i32x4(t[2], t[3], 0xee));
  return _mm512_add_epi32(_mm512_shuffle_i32x4(t01, t23, 0x88),
                          _mm512_shuffle_i32x4(t01, t23, 0xdd));
}

/* Lane 4p + k: emax - e_p, e_p byte p of scale word lane 4p + k (so
 * block p holds group p's distance below the page's largest scale byte
 * but 255; negative for a byte 255). */
TARGET static INLINE __m512i block_down(__m512i words, int32_t emax) {
  const __m512i group = _mm512_set_epi32(24, 24, 24, 24, 16, 16, 16, 16, 8, 8, 8, 8, 0, 0, 0, 0);
  const __m512i e = _mm512_and_si512(_mm512_srlv_epi32(words, group), _mm512_set1_epi32(255));
  return _mm512_sub_epi32(_mm512_set1_epi32(emax), e);
}

/* x[j] holds key j's data; y[4a + c], lane 4p + k, is dword 4p + c of key
 * 4a + k: a 4 x 4 transpose within each 128-bit block (which shuffles
 * cheaply), so that block p holds group p of four keys. */
TARGET static INLINE void transpose_blocks(const __m512i x[16], __m512i y[16]) {
#pragma GCC unroll 4
  for (int a = 0; a < 4; a++) {
    const __m512i l01 = _mm512_unpacklo_epi32(x[4 * a], x[4 * a + 1]);
    const __m512i h01 = _mm512_unpackhi_epi32(x[4 * a], x[4 * a + 1]);
    const __m512i l23 = _mm512_unpacklo_epi32(x[4 * a + 2], x[4 * a + 3]);
    const __m512i h23 = _mm512_unpackhi_epi32(x[4 * a + 2], x[4 * a + 3]);
    y[4 * a] = _mm512_unpacklo_epi64(l01, l23);
    y[4 * a + 1] = _mm512_unpackhi_epi64(l01, l23);
    y[4 * a + 2] = _mm512_unpacklo_epi64(h01, h23);
    y[4 * a + 3] = _mm512_unpackhi_epi64(h01, h23);
  }
}

/* Keys 16 tile .. 16 tile + 15 of page: v[2i + h] lane 4p + k holds the
 * code bytes of the elements in the low (h 0) or high (h 1) nibbles of
 * y[i]'s dword (transpose_blocks); down[a] lane 4p + k is emax - e_p of key
 * 4a + k (0 for a byte 255, whose key is not valid); the result has bit j
 * set for a key j whose scale bytes hold no 255. */
TARGET static INLINE uint32_t decode_tile(const uint8_t *page, int tile, int32_t emax,
                                          __m512i v[32], __m512i down[4], __m512i *bound) {
  __m512i x[16], y[16];
#pragma GCC unroll 16
  for (int j = 0; j < 16; j++)
    x[j] = _mm512_loadu_si512(page + 64 * (16 * tile + j));
  transpose_blocks(x, y);
#pragma GCC unroll 16
  for (int i = 0; i < 16; i++) {
    v[2 * i] = code_bytes(y[i], 0);
    v[2 * i + 1] = code_bytes(y[i], 1);
  }
  const __m512i s = _mm512_loadu_si512(page + M3IDX_PAGE_DATA_BYTES + 64 * tile);
  /* keys 4a .. 4a + 3 in every block */
  const __m512i quad[4] = {_mm512_shuffle_i32x4(s, s, 0x00), _mm512_shuffle_i32x4(s, s, 0x55),
                           _mm512_shuffle_i32x4(s, s, 0xaa), _mm512_shuffle_i32x4(s, s, 0xff)};
#pragma GCC unroll 4
  for (int a = 0; a < 4; a++) /* 0 for a byte 255, whose key is not valid */
    down[a] = _mm512_max_epi32(block_down(quad[a], emax), _mm512_setzero_si512());
  if (bound != NULL) { /* B of each key (lib/filter-cut.h), for filter_tile_one */
    __m512i b[4];
#pragma GCC unroll 4
    for (int a = 0; a < 4; a++) {
      const __m512i e = _mm512_add_epi8(
          _mm512_add_epi8(pair_magnitudes(y[4 * a]), pair_magnitudes(y[4 * a + 1])),
          _mm512_add_epi8(pair_magnitudes(y[4 * a + 2]), pair_magnitudes(y[4 * a + 3])));
      const __m512i eg = _mm512_dpbusd_epi32(_mm512_setzero_si512(), e, _mm512_set1_epi8(1));
      b[a] = _mm512_srav_epi32(_mm512_slli_epi32(eg, 6), down[a]);
    }
    *bound = _mm512_add_epi32(add_blocks(b), _mm512_set1_epi32(8));
  }
  uint64_t nan = _mm512_cmpeq_epi8_mask(s, _mm512_set1_epi8((char)0xff));
  nan |= nan >> 1;
  nan |= nan >> 2;
  return ~(uint32_t)_pext_u64(nan, 0x1111111111111111ull) & 0xffffu;
}

/* A of the tile's 16 keys for one row: eight sums in flight (four key
 * quads, two planes), so that vpdpbusd's latency is hidden; each lane sums
 * one group of one key, shifts it right by down (arithmetic: the floor of
 * the sum times 2^(e_p - emax), lib/filter-cut.h), and the four groups
 * are added across the blocks at the end, exactly. */
TARGET static INLINE __m512i filter_tile(const __m512i v[32], const __m512i down[4],
                                         const struct m3idx_cpu_digits *dg) {
  __m512i lo[4], hi[4];
  const __m512i start = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_load_si512(dg->bias));
#pragma GCC unroll 4
  for (int a = 0; a < 4; a++) {
    lo[a] = start; /* minus the row's bias (the codes' + M3IDX_CUT_CODE_BIAS) */
    hi[a] = _mm512_setzero_si512();
  }
#pragma GCC unroll 8
  for (int m = 0; m < 8; m++)
#pragma GCC unroll 4
    for (int a = 0; a < 4; a++) {
      lo[a] = _mm512_dpbusd_epi32(lo[a], v[8 * a + m], _mm512_load_si512(dg->lo[m]));
      hi[a] = _mm512_dpbusd_epi32(hi[a], v[8 * a + m], _mm512_load_si512(dg->hi[m]));
    }
  __m512i t[4];
#pragma GCC unroll 4
  for (int a = 0; a < 4; a++) {
    t[a] = _mm512_srav_epi32(_mm512_add_epi32(_mm512_slli_epi32(hi[a], 8), lo[a]), down[a]);
  }
  return add_blocks(t);
}

/* H of the tile's 16 keys for one row (lib/filter-cut.h): the one-plane
 * cut's group sums, times 128 and shifted right as in filter_tile.  Four
 * sums in flight: the other rows' fill vpdpbusd's latency. */
TARGET static INLINE __m512i filter_tile_one(const __m512i v[32], const __m512i down[4],
                                             const struct m3idx_cpu_digits *dg) {
  __m512i p[4];
  const __m512i start = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_load_si512(dg->bias_p));
#pragma GCC unroll 4
  for (int a = 0; a < 4; a++)
    p[a] = start; /* minus the plane's bias */
#pragma GCC unroll 8
  for (int m = 0; m < 8; m++)
#pragma GCC unroll 4
    for (int a = 0; a < 4; a++)
      p[a] = _mm512_dpbusd_epi32(p[a], v[8 * a + m], _mm512_load_si512(dg->p[m]));
  __m512i t[4];
#pragma GCC unroll 4
  for (int a = 0; a < 4; a++)
    t[a] = _mm512_srav_epi32(_mm512_slli_epi32(p[a], 7), down[a]);
  return add_blocks(t);
}

/* The page's largest scale byte but 255 (0 if every byte is 255). */
TARGET static INLINE int32_t page_emax(const uint8_t *page) {
  __m512i m = _mm512_setzero_si512();
  const __m512i ff = _mm512_set1_epi8((char)0xff);
#pragma GCC unroll 8
  for (int i = 0; i < 8; i++) {
    const __m512i s = _mm512_loadu_si512(page + M3IDX_PAGE_DATA_BYTES + 64 * i);
    m = _mm512_max_epu8(m, _mm512_maskz_mov_epi8(~_mm512_cmpeq_epi8_mask(s, ff), s));
  }
  m = _mm512_max_epu8(m, _mm512_srli_epi32(m, 16));
  m = _mm512_max_epu8(m, _mm512_srli_epi32(m, 8));
  return (int32_t)_mm512_reduce_max_epu32(_mm512_and_si512(m, _mm512_set1_epi32(255)));
}

/* D of key (data, sc) for a row whose span and the key's scale spread
 * allow fp64 sums (lib/spec-rules.h: no partial sum can round, in any
 * order): elements in natural order, 8 a vector, each code's value times
 * its group's scale through a 16-entry table. */
TARGET static INLINE double key_d_fp64(const float *q, const uint8_t *data, const uint8_t *sc) {
  const __m512d lo = _mm512_set_pd(6.0, 4.0, 3.0, 2.0, 1.5, 1.0, 0.5, 0.0);
  const __m512d hi = _mm512_sub_pd(_mm512_setzero_pd(), lo); /* codes 8..15 */
  const __m512i shifts = _mm512_set_epi64(4, 0, 4, 0, 4, 0, 4, 0), nib = _mm512_set1_epi64(15);
  __m512d acc[2] = {_mm512_setzero_pd(), _mm512_setzero_pd()};
#pragma GCC unroll 4
  for (int g = 0; g < 4; g++) {
    const __m512d s = _mm512_set1_pd(m3idx__e8m0_double(sc[g]));
    const __m512d tl = _mm512_mul_pd(lo, s), th = _mm512_mul_pd(hi, s);
#pragma GCC unroll 4
    for (int m = 0; m < 4; m++) { /* elements 32g + 8m .. + 7: 4 bytes */
      uint32_t w;
      memcpy(&w, data + 16 * g + 4 * m, 4);
      const __m128i b = _mm_unpacklo_epi8(_mm_cvtsi32_si128((int)w), _mm_cvtsi32_si128((int)w));
      const __m512i idx = _mm512_and_si512(_mm512_srlv_epi64(_mm512_cvtepu8_epi64(b), shifts), nib);
      const __m512d k = _mm512_permutex2var_pd(tl, idx, th);
      acc[m & 1] = _mm512_fmadd_pd(k, _mm512_cvtps_pd(_mm256_loadu_ps(q + 32 * g + 8 * m)), acc[m & 1]);
    }
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(acc[0], acc[1]));
}

/* Block g of the result, every lane: S_g of the key whose data is x, for
 * a row's cut (vpdpbusd in the key's own order). */
TARGET static INLINE __m512i group_sums(const struct m3idx_cpu_digits *dg, __m512i x) {
  const __m512i even = code_bytes(x, 0), odd = code_bytes(x, 1);
  __m512i lo = _mm512_dpbusd_epi32(_mm512_setzero_si512(), even, _mm512_load_si512(dg->one_lo[0]));
  __m512i hi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), even, _mm512_load_si512(dg->one_hi[0]));
  lo = _mm512_dpbusd_epi32(lo, odd, _mm512_load_si512(dg->one_lo[1]));
  hi = _mm512_dpbusd_epi32(hi, odd, _mm512_load_si512(dg->one_hi[1]));
  __m512i s = _mm512_add_epi32(_mm512_slli_epi32(hi, 8), lo); /* block g: group g's four quarters */
  s = _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_PERM_BADC));
  s = _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_PERM_CDAB));
  return _mm512_sub_epi32(s, _mm512_load_si512(dg->bias));
}

/* A of key t of page for a row: filter_tile's, for one key whose scale
 * bytes hold no 255. */
TARGET static INLINE int32_t key_a(const struct m3idx_cpu_digits *dg, const uint8_t *page, int t,
                                   int32_t emax) {
  const __m512i s = group_sums(dg, _mm512_loadu_si512(page + 64 * t));
  uint32_t w;
  memcpy(&w, page + M3IDX_PAGE_DATA_BYTES + 4 * t, 4);
  const __m512i a = _mm512_srav_epi32(s, block_down(_mm512_set1_epi32((int)w), emax));
  return _mm512_mask_reduce_add_epi32(0x1111, a);
}

/* D of key (data, sc) from a row's cut (lib/filter-cut.h), for a row
 * whose span and the key's scale spread allow fp64 sums and whose
 * residuals the cut holds: the group sums S_g of Q times the halves by
 * vpdpbusd in the key's own order, each times 2^(e_g - emin), plus the
 * residuals' products, sixteen lanes at once (exact in any order). */
TARGET static INLINE double key_d_cut(const struct m3idx_cpu_digits *dg, const uint8_t *data,
                                      const uint8_t *sc) {
  const __m512i x = _mm512_loadu_si512(data);
  const __m512i s = group_sums(dg, x);
  const __m128i g4 = _mm512_castsi512_si128(
      _mm512_permutexvar_epi32(_mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0), s));
  int32_t emin = sc[0];
  for (int g = 1; g < 4; g++)
    emin = sc[g] < emin ? sc[g] : emin;
  uint32_t w;
  memcpy(&w, sc, 4);
  const __m256i e = _mm256_cvtepu8_epi64(_mm_cvtsi32_si128((int)w));
  const __m256d f = _mm256_castsi256_pd(
      _mm256_slli_epi64(_mm256_add_epi64(e, _mm256_set1_epi64x(1023 - emin)), 52));
  const __m256d y = _mm256_mul_pd(_mm256_cvtepi32_pd(g4), f);
  const __m128d y2 = _mm_add_pd(_mm256_castpd256_pd128(y), _mm256_extractf128_pd(y, 1));
  /* Residual i, element d: its code from the key's dword d / 8 (bit
   * 4 (d % 8)), in halves through the codes' table, times its z - Q and
   * its group's 2^(e_g - emin) (e_g: byte d / 32 of the scale word; 0
   * past the last residual, as z - Q is). */
  const __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)dg->res_element));
  const __m512i bit = _mm512_slli_epi32(_mm512_and_si512(d, _mm512_set1_epi32(7)), 2);
  const __m512i cw = _mm512_srlv_epi32(_mm512_permutexvar_epi32(_mm512_srli_epi32(d, 3), x), bit);
  const __m512i halves = _mm512_sub_epi32(
      _mm512_and_si512(code_bytes(cw, 0), _mm512_set1_epi32(255)), /* the low byte's code */
      _mm512_set1_epi32(M3IDX_CUT_CODE_BIAS));
  const __m512i eg = _mm512_and_si512(
      _mm512_srlv_epi32(_mm512_set1_epi32((int)w), _mm512_slli_epi32(_mm512_srli_epi32(d, 5), 3)),
      _mm512_set1_epi32(255));
  const __m512i de = _mm512_sub_epi32(eg, _mm512_set1_epi32(emin - 1023)); /* fp64 exponent bits */
  __m512d rs[2];
#pragma GCC unroll 2
  for (int h = 0; h < 2; h++) {
    const __m256i hh = h ? _mm512_extracti64x4_epi64(halves, 1) : _mm512_castsi512_si256(halves);
    const __m256i eh = h ? _mm512_extracti64x4_epi64(de, 1) : _mm512_castsi512_si256(de);
    const __m512d fg = _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_cvtepi32_epi64(eh), 52));
    const __m512d rh = _mm512_mul_pd(_mm512_load_pd(dg->res_value + 8 * h), _mm512_cvtepi32_pd(hh));
    rs[h] = _mm512_mul_pd(rh, fg);
  }
  const double sum = _mm_cvtsd_f64(_mm_add_sd(y2, _mm_unpackhi_pd(y2, y2))) +
                     _mm512_reduce_add_pd(_mm512_add_pd(rs[0], rs[1]));
  const double p = m3idx__bits_to_double((uint64_t)(1023 + dg->hq - 141 + emin) << 52);
  return dg->negate ? -(sum * p) : sum * p;
}

/* Key t of page into the row's block best: skipped for a NaN scale byte
 * (its logit is NaN, which the block maximum ignores); summed in fp64 where
 * that is exact (from the row's cut where it holds the residuals), exactly
 * otherwise. */
TARGET static void take_key(struct m3idx__block_best *b, const struct m3idx_cpu_row *row,
                            const uint8_t *page, int t, float scale) {
  const uint8_t *data = page + 64 * t, *sc = page + M3IDX_PAGE_DATA_BYTES + 4 * t;
  const int32_t spread = m3idx__key_spread(sc);
  if (spread == 255)
    return;
  if (spread > row->spread)
    m3idx__best_take_logit(b, m3idx__exact_logit_of_row(row->q, row->spread, data, sc, scale));
  else if (row->digits->kind == M3IDX_CPU_ROW_FILTER && row->digits->residuals >= 0)
    m3idx__best_take_d(b, key_d_cut(row->digits, data, sc), scale);
  else
    m3idx__best_take_d(b, key_d_fp64(row->q, data, sc), scale);
}

/* Below every A and every H - B (each under 2^26 in magnitude), and far
 * enough above INT32_MIN that the margin can be taken off it: the maximum
 * of a row that filtered no key. */
#define NO_A (-(1 << 30))

/* The lanes of tile whose keys a row of nkeys causal keys sees. */
static inline uint32_t causal_lanes(int32_t nkeys, int tile) {
  const int32_t n = nkeys - 16 * tile;
  return n >= 16 ? 0xffffu : n <= 0 ? 0u : (1u << n) - 1u;
}

/* Pages of this many rows or more are filtered on one plane first: from
 * there the second plane's vpdpbusd saved outweigh B's cost a tile (one
 * vpermt2b a vector with VBMI, six instructions without; TUNING-NOTES). */
#ifdef M3IDX_VNNI_VBMI
#define ONE_PLANE_ROWS 3
#else
#define ONE_PLANE_ROWS 5
#endif

/* The kernel, for a filter of both planes (A) or of the one-plane cut
 * first (H, within B of the key's scaled D: lib/filter-cut.h).  The keys
 * whose A reaches the row's largest A less M3IDX_CUT_MARGIN are scored
 * exactly; with one plane, A is formed only for the keys whose H + B
 * reaches the row's largest H - B. */
TARGET static INLINE void score_page(const uint8_t *page, const uint8_t *ahead,
                                     const struct m3idx_cpu_row *rows, int nrows, float scale,
                                     const int one_plane) {
  _Alignas(64) int32_t a[M3IDX_CPU_ROW_BATCH][M3IDX_HEAD_DIM];
  _Alignas(64) int32_t bound[M3IDX_HEAD_DIM];
  int32_t pass_a[M3IDX_BLOCK_SIZE], pass_key[M3IDX_BLOCK_SIZE + 16]; /* + a store's slack */
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  __m512i amax[M3IDX_CPU_ROW_BATCH];
  uint32_t seen[M3IDX_CPU_ROW_BATCH][8];
  int kmax = 0;
  for (int r = 0; r < nrows; r++) {
    kmax = rows[r].nkeys > kmax ? rows[r].nkeys : kmax;
    amax[r] = _mm512_set1_epi32(NO_A);
  }
  const int32_t emax = page_emax(page);
  const int tiles = (kmax + 15) / 16;
  for (int tile = 0; tile < tiles; tile++) {
    if (ahead != NULL) /* the page ahead, a share a tile (page-prefetch.h) */
      m3idx__cpu_prefetch_share(ahead, tile);
    __m512i v[32], down[4], b = _mm512_setzero_si512();
    const uint32_t valid = decode_tile(page, tile, emax, v, down, one_plane ? &b : NULL);
    if (one_plane)
      _mm512_store_si512(bound + 16 * tile, b);
    for (int r = 0; r < nrows; r++) {
      const uint32_t lanes = valid & causal_lanes(rows[r].nkeys, tile);
      seen[r][tile] = lanes;
      if (rows[r].digits->kind != M3IDX_CPU_ROW_FILTER || lanes == 0u)
        continue;
      const __m512i t = one_plane ? filter_tile_one(v, down, rows[r].digits)
                                  : filter_tile(v, down, rows[r].digits);
      _mm512_store_si512(a[r] + 16 * tile, t);
      amax[r] = _mm512_mask_max_epi32(amax[r], (__mmask16)lanes, amax[r], _mm512_sub_epi32(t, b));
    }
  }
  for (int r = 0; r < nrows; r++) {
    struct m3idx__block_best best;
    m3idx__best_start(&best);
    const int kind = rows[r].digits->kind;
    if (kind == M3IDX_CPU_ROW_EXACT) {
      for (int t = 0; t < rows[r].nkeys; t++)
        take_key(&best, &rows[r], page, t, scale);
    } else if (kind == M3IDX_CPU_ROW_ZERO) { /* every D is 0: one valid key says it */
      for (int tile = 0; tile < tiles; tile++)
        if (seen[r][tile] != 0u) {
          take_key(&best, &rows[r], page, 16 * tile + __builtin_ctz(seen[r][tile]),
                              scale);
          break;
        }
    } else {
      /* The keys whose A reaches max A - M3IDX_CUT_MARGIN (one plane: whose
       * H + B reaches max(H - B)), gathered without a branch a key. */
      const __m512i floor = _mm512_set1_epi32(_mm512_reduce_max_epi32(amax[r]) -
                                              (one_plane ? 0 : (int32_t)M3IDX_CUT_MARGIN));
      int n = 0;
      for (int tile = 0; tile < tiles; tile++) {
        if (seen[r][tile] == 0u) /* a[r] was not written */
          continue;
        __m512i t = _mm512_load_si512(a[r] + 16 * tile);
        if (one_plane)
          t = _mm512_add_epi32(t, _mm512_load_si512(bound + 16 * tile));
        const __mmask16 c = _mm512_mask_cmpge_epi32_mask((__mmask16)seen[r][tile], t, floor);
        _mm512_storeu_si512(pass_key + n, _mm512_maskz_compress_epi32(
                                              c, _mm512_add_epi32(_mm512_set1_epi32(16 * tile), lane)));
        n += __builtin_popcount(c);
      }
      if (one_plane) { /* then A's test, on those keys only */
        int32_t most = NO_A;
        for (int i = 0; i < n; i++) {
          pass_a[i] = key_a(rows[r].digits, page, pass_key[i], emax);
          most = pass_a[i] > most ? pass_a[i] : most;
        }
        int m = 0;
        for (int i = 0; i < n; i++) {
          pass_key[m] = pass_key[i];
          m += pass_a[i] >= most - (int32_t)M3IDX_CUT_MARGIN;
        }
        n = m;
      }
      for (int i = 0; i < n; i++)
        take_key(&best, &rows[r], page, pass_key[i], scale);
    }
    *rows[r].out = m3idx__cpu_best_score(&best, scale);
  }
}

TARGET __attribute__((noinline)) static void score_page_two_planes(
    const uint8_t *page, const uint8_t *ahead, const struct m3idx_cpu_row *rows, int nrows,
    float scale) {
  score_page(page, ahead, rows, nrows, scale, 0);
}

TARGET __attribute__((noinline)) static void score_page_one_plane(
    const uint8_t *page, const uint8_t *ahead, const struct m3idx_cpu_row *rows, int nrows,
    float scale) {
  score_page(page, ahead, rows, nrows, scale, 1);
}

TARGET void KERNEL(const uint8_t *page, const uint8_t *ahead, const struct m3idx_cpu_row *rows,
                   int nrows, float scale) {
  if (nrows >= ONE_PLANE_ROWS)
    score_page_one_plane(page, ahead, rows, nrows, scale);
  else
    score_page_two_planes(page, ahead, rows, nrows, scale);
}
#endif
