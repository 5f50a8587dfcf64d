/*
 * bound.c - the terms of verification's bound (lib/verify-rules.h): for
 * each (head, row) and causal block, the largest sum |q[d] k[d]| and the
 * largest sum |k[d]| over the block's causal keys whose scales are not
 * NaN.  Each is an fp64 sum of exact nonnegative terms, within 2^-46 of
 * the truth, which the rule's slack covers.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <math.h>

#include "cpu.h"
#include "fp-env.h"
#include "omp-compat.h"
#include "spec-rules.h"

/* |e2m1| of each code. */
static const double code_magnitude[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6,
                                          0, 0.5, 1, 1.5, 2, 3, 4, 6};

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
      double ag = 0.0, kg = 0.0;
      for (int d = 32 * g; d < 32 * g + 32; d++) {
        const double m = code_magnitude[(d & 1) ? data[d / 2] >> 4 : data[d / 2] & 15u];
        ag += q[d] * m;
        kg += m;
      }
      const double s = m3idx__e8m0_double(sc[g]);
      a += ag * s;
      k += kg * s;
    }
    a_max = a > a_max || a != a ? a : a_max;
    k_max = k > k_max ? k : k_max;
  }
  out[0] = a_max;
  out[1] = k_max;
}

void m3idx__cpu_block_bounds(struct m3idx_cpu_state *s, const struct m3idx_call *c,
                             double *out) {
  m3idx__cpu_row_positions(s, c);
  const int64_t width = c->width, total = (int64_t)c->num_heads * c->num_rows;
#pragma omp parallel num_threads(m3idx__cpu_team(s))
  {
    m3idx_fpenv env = m3idx__fpenv_enter();
#pragma omp for schedule(dynamic, 1)
    for (int64_t hr = 0; hr < total; hr++) {
      const int32_t h = (int32_t)(hr / c->num_rows), row = (int32_t)(hr % c->num_rows);
      const int32_t pos = s->row_pos[row], req = request_of(c, row);
      const int64_t qi = ((int64_t)row * c->num_heads + h) * M3IDX_HEAD_DIM;
      double q[M3IDX_HEAD_DIM];
      for (int d = 0; d < M3IDX_HEAD_DIM; d++)
        q[d] = fabs((double)(c->query_dtype == M3IDX_DTYPE_BF16
                                 ? m3idx__bf16_value(((const uint16_t *)c->query)[qi + d])
                                 : m3idx__e4m3_value(((const uint8_t *)c->query)[qi + d])));
      const int32_t n = pos / M3IDX_BLOCK_SIZE + 1;
      for (int32_t b = 0; b < n; b++) {
        const int32_t id = c->block_table[(int64_t)req * c->bt_stride + b];
        const int32_t keys = pos - b * M3IDX_BLOCK_SIZE + 1 < M3IDX_BLOCK_SIZE
                                 ? pos - b * M3IDX_BLOCK_SIZE + 1
                                 : M3IDX_BLOCK_SIZE;
        block_terms(c->pages + (int64_t)id * M3IDX_PAGE_BYTES, keys, q,
                    out + (hr * width + b) * 2);
      }
    }
    m3idx__fpenv_leave(env);
  }
}
