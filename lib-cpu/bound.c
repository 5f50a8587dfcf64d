/*
 * bound.c - the terms of verification's bound (lib/verify-rules.h): for
 * each (head, row) and causal block, the largest sum |q[d] k[d]| and the
 * largest sum |k[d]| over the block's causal keys whose scales are not
 * NaN.  Each is an fp64 sum of exact nonnegative terms, within 2^-46 of
 * the truth, which the rule's slack covers; the AVX-512 form sums in
 * another order, so its last bits may differ from the scalar form's.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "fp-env.h"
#include "omp-compat.h"
#include "spec-rules.h"

/* The request a row belongs to. */
static int32_t request_of(const struct m3idx_call *c, int32_t row) {
  if (c->mode == M3IDX_MODE_DECODE)
    return row / c->query_len;
  int32_t lo = 0, hi = c->num_reqs - 1; /* the last r with cu[r] <= row */
  while (lo < hi) {
    int32_t mid = (lo + hi + 1) / 2;
    if (c->cu_seqlens_q[mid] <= row)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/* Block b's two terms for one row (q its 128 magnitudes). */
static void block_terms(const uint8_t *page, int32_t keys, const double *q, double *out) {
  double a_max = 0.0, k_max = 0.0;
  for (int32_t t = 0; t < keys; t++) {
    const uint8_t *data = page + 64 * t, *sc = page + M3IDX_PAGE_DATA_BYTES + 4 * t;
    if (m3idx__key_spread(sc) == 255)
      continue; /* a NaN scale: the key's logit is NaN, ignored by the block */
    double a = 0.0, k = 0.0;
    for (int g = 0; g < 4; g++) {
      double ag = 0.0, kg = 0.0; /* in halves */
      for (int d = 32 * g; d < 32 * g + 32; d++) {
        const double m = abs(m3idx__e2m1_halves(m3idx__code_at(data, d)));
        ag += q[d] * m;
        kg += m;
      }
      const double s = m3idx__e8m0_double(sc[g]) * 0.5;
      a += ag * s;
      k += kg * s;
    }
    a_max = a > a_max || a != a ? a : a_max;
    k_max = k > k_max ? k : k_max;
  }
  out[0] = a_max;
  out[1] = k_max;
}

#ifdef M3IDX_CPU_HAVE_AVX512
#include <immintrin.h>

#include "cpu-features.h"

/* block_terms with AVX-512 F: eight elements a vector, each code's
 * magnitude times its group's scale through an 8-entry table. */
__attribute__((target("avx512f"))) static void block_terms_avx512(const uint8_t *page,
                                                                  int32_t keys, const double *q,
                                                                  double *out) {
  const __m512d mags = _mm512_set_pd(6.0, 4.0, 3.0, 2.0, 1.5, 1.0, 0.5, 0.0);
  const __m512i shifts = _mm512_set_epi64(4, 0, 4, 0, 4, 0, 4, 0), seven = _mm512_set1_epi64(7);
  double a_max = 0.0, k_max = 0.0;
  for (int32_t t = 0; t < keys; t++) {
    const uint8_t *data = page + 64 * t, *sc = page + M3IDX_PAGE_DATA_BYTES + 4 * t;
    if (m3idx__key_spread(sc) == 255)
      continue;
    __m512d a = _mm512_setzero_pd(), k = _mm512_setzero_pd();
    for (int g = 0; g < 4; g++) {
      const __m512d table = _mm512_mul_pd(mags, _mm512_set1_pd(m3idx__e8m0_double(sc[g])));
      for (int m = 0; m < 4; m++) { /* elements 32g + 8m .. + 7: 4 bytes */
        uint32_t w;
        memcpy(&w, data + 16 * g + 4 * m, 4);
        const __m128i b = _mm_unpacklo_epi8(_mm_cvtsi32_si128((int)w), _mm_cvtsi32_si128((int)w));
        const __m512i idx = _mm512_and_si512(_mm512_srlv_epi64(_mm512_cvtepu8_epi64(b), shifts),
                                             seven);
        const __m512d v = _mm512_permutexvar_pd(idx, table);
        a = _mm512_fmadd_pd(v, _mm512_loadu_pd(q + 32 * g + 8 * m), a);
        k = _mm512_add_pd(k, v);
      }
    }
    const double at = _mm512_reduce_add_pd(a), kt = _mm512_reduce_add_pd(k);
    a_max = at > a_max || at != at ? at : a_max;
    k_max = kt > k_max ? kt : k_max;
  }
  out[0] = a_max;
  out[1] = k_max;
}
#endif

void m3idx__cpu_block_bounds(struct m3idx_cpu_state *s, const struct m3idx_call *c,
                             double *out) {
  m3idx__cpu_decode_queries(s, c);
  m3idx__cpu_row_positions(s, c);
  void (*terms)(const uint8_t *, int32_t, const double *, double *) = block_terms;
#ifdef M3IDX_CPU_HAVE_AVX512
  if (m3idx__cpu_has_avx512f())
    terms = block_terms_avx512;
#endif
  /* Work items are (head, row, block), so one long row spreads over the
     threads; each item takes its row's magnitudes from the decoded rows. */
  const int64_t width = c->width, total = (int64_t)c->num_heads * c->num_rows * width;
#pragma omp parallel num_threads(m3idx__cpu_team(s))
  {
    m3idx_fpenv env = m3idx__fpenv_enter();
#pragma omp for schedule(dynamic, 16)
    for (int64_t item = 0; item < total; item++) {
      const int64_t hr = item / width;
      const int32_t b = (int32_t)(item % width);
      const int32_t h = (int32_t)(hr / c->num_rows), row = (int32_t)(hr % c->num_rows);
      const int32_t pos = s->row_pos[row];
      if (b > pos / M3IDX_BLOCK_SIZE)
        continue; /* past the row's causal blocks */
      const int32_t req = request_of(c, row);
      const float *qf = s->query_f32 + ((int64_t)row * c->num_heads + h) * M3IDX_HEAD_DIM;
      double q[M3IDX_HEAD_DIM];
      for (int d = 0; d < M3IDX_HEAD_DIM; d++)
        q[d] = fabs((double)qf[d]);
      const int32_t id = c->block_table[(int64_t)req * c->bt_stride + b];
      terms(c->pages + (int64_t)id * M3IDX_PAGE_BYTES, m3idx__cpu_keys_seen(pos, b), q,
            out + item * 2);
    }
    m3idx__fpenv_leave(env);
  }
}
