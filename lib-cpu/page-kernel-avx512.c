/*
 * page-kernel-avx512.c - the fp64 fast path of page-kernel-fp64.c with
 * AVX-512 F: a key's 128 elements in 16 vectors of 8 doubles, decoded once
 * for all the rows of the call through a 16-entry table (vpermt2pd) that
 * already holds each group's scale, then one multiply-add a vector a row.
 * The order of the adds is free: under the row's and key's exactness
 * condition every partial sum is exact (lib/spec-rules.h).  Keys past the
 * row's spread are summed group by group, each group exact, and the four
 * sums rounded once (m3idx__logit_of_terms).
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include "cpu.h"

#ifdef M3IDX_CPU_HAVE_AVX512
#include <immintrin.h>

#include "spec-rules.h"

#define TARGET __attribute__((target("avx512f")))
#define INLINE inline __attribute__((always_inline))

/* Rows' elements in the kernel's order: vector 4g + 2h + o holds elements
 * 32g + 16h + 2i + o, i = 0..7 (o: 0 the low nibbles, 1 the high). */
TARGET static void split_query(const float *q, double *out) {
  for (int v = 0; v < 16; v++) {
    const int base = 32 * (v >> 2) + 16 * ((v >> 1) & 1) + (v & 1);
    for (int i = 0; i < 8; i++)
      out[8 * v + i] = (double)q[base + 2 * i];
  }
}

/* The key's 16 vectors, each element times its group's scale (exact). */
TARGET static INLINE void decode_key(const uint8_t *data, const uint8_t *sc, __m512d k[16]) {
  _Alignas(64) uint8_t codes[2][64];
  const __m512i b = _mm512_loadu_si512(data), f = _mm512_set1_epi8(15);
  _mm512_store_si512(codes[0], _mm512_and_si512(b, f));
  _mm512_store_si512(codes[1], _mm512_and_si512(_mm512_srli_epi32(b, 4), f));
  const __m512d lo = _mm512_set_pd(6.0, 4.0, 3.0, 2.0, 1.5, 1.0, 0.5, 0.0);
  const __m512d hi = _mm512_sub_pd(_mm512_setzero_pd(), lo); /* codes 8..15 (-0 as 8) */
#pragma GCC unroll 4
  for (int g = 0; g < 4; g++) {
    const __m512d s = _mm512_set1_pd(m3idx__e8m0_double(sc[g]));
    const __m512d tl = _mm512_mul_pd(lo, s), th = _mm512_mul_pd(hi, s);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++)
#pragma GCC unroll 2
      for (int o = 0; o < 2; o++) {
        const __m128i c = _mm_loadl_epi64((const __m128i *)(codes[o] + 16 * g + 8 * h));
        k[4 * g + 2 * h + o] = _mm512_permutex2var_pd(tl, _mm512_cvtepu8_epi64(c), th);
      }
  }
}

TARGET static INLINE double dot(const __m512d k[16], const double *q) {
  __m512d a = _mm512_mul_pd(k[0], _mm512_load_pd(q)), b = _mm512_mul_pd(k[1], _mm512_load_pd(q + 8));
#pragma GCC unroll 8
  for (int v = 2; v < 16; v += 2) {
    a = _mm512_fmadd_pd(k[v], _mm512_load_pd(q + 8 * v), a);
    b = _mm512_fmadd_pd(k[v + 1], _mm512_load_pd(q + 8 * v + 8), b);
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(a, b));
}

/* The key's four group sums for a row (vectors 4g .. 4g + 3 are group g):
 * each exact in any order where the row allows fp64 sums over one scale,
 * the terms of m3idx__logit_of_terms for keys past the row's spread. */
TARGET static INLINE void group_dots(const __m512d k[16], const double *q, double t[4]) {
#pragma GCC unroll 4
  for (int g = 0; g < 4; g++) {
    __m512d a = _mm512_mul_pd(k[4 * g], _mm512_load_pd(q + 32 * g));
#pragma GCC unroll 3
    for (int v = 1; v < 4; v++)
      a = _mm512_fmadd_pd(k[4 * g + v], _mm512_load_pd(q + 32 * g + 8 * v), a);
    t[g] = _mm512_reduce_add_pd(a);
  }
}

TARGET void m3idx__cpu_page_scores_avx512(const uint8_t *page, const uint8_t *ahead,
                                          const struct m3idx_cpu_row *rows, int nrows,
                                          float scale) {
  struct m3idx__block_best best[M3IDX_CPU_ROW_BATCH];
  _Alignas(64) double q[M3IDX_CPU_ROW_BATCH][M3IDX_HEAD_DIM];
  int kmax = 0;
  for (int r = 0; r < nrows; r++) {
    m3idx__best_start(&best[r]);
    kmax = rows[r].nkeys > kmax ? rows[r].nkeys : kmax;
    if (rows[r].spread >= 0)
      split_query(rows[r].q, q[r]);
  }
  for (int t = 0; t < kmax; t++) {
    if (ahead != NULL) /* the page ahead, a key's 68 bytes a key */
      _mm_prefetch((const char *)ahead + 68 * t, _MM_HINT_T0);
    const uint8_t *sc = page + M3IDX_PAGE_DATA_BYTES + 4 * t;
    const int32_t spread = m3idx__key_spread(sc);
    if (spread == 255) /* a NaN scale: every row's logit is NaN, ignored */
      continue;
    __m512d k[16];
    decode_key(page + 64 * t, sc, k);
    for (int r = 0; r < nrows; r++) {
      if (t >= rows[r].nkeys)
        continue;
      if (spread <= rows[r].spread) {
        m3idx__best_take_d(&best[r], dot(k, q[r]), scale);
      } else if (rows[r].spread >= 0) {
        double terms[4];
        group_dots(k, q[r], terms);
        m3idx__best_take_logit(&best[r], m3idx__logit_of_terms(terms, scale));
      } else {
        m3idx__best_take_logit(&best[r], m3idx__exact_logit(rows[r].q, page + 64 * t, sc, scale));
      }
    }
  }
  for (int r = 0; r < nrows; r++)
    *rows[r].out = m3idx__cpu_best_score(&best[r], scale);
}
#endif
