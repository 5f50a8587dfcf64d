/*
 * row-digits.c - a query row cut into integer digit planes for the vnni
 * kernel's filter (lib/filter-cut.h; the layout is described at struct
 * m3idx_cpu_digits).  Scalar: it runs once a row and call, not once a page.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include "cpu.h"
#include "filter-cut.h"
#include "spec-rules.h"

void m3idx__cpu_cut_row(const float *q, float scale, struct m3idx_cpu_digits *out) {
  uint32_t top = 0u;
  for (int d = 0; d < M3IDX_HEAD_DIM; d++) {
    const uint32_t u = m3idx__float_to_bits(q[d]) & 0x7fffffffu;
    top = u > top ? u : top;
  }
  out->kind = top >= 0x7f800000u ? M3IDX_CPU_ROW_EXACT
              : top == 0u        ? M3IDX_CPU_ROW_ZERO
                                 : M3IDX_CPU_ROW_FILTER;
  if (out->kind != M3IDX_CPU_ROW_FILTER)
    return;
  const int32_t hq = m3idx__cut_exponent(top);
  const int negate = scale < 0.0f;
  out->hq = hq;
  out->negate = negate;
  out->residuals = 0;
  for (int i = 0; i < M3IDX_CPU_CUT_RESIDUALS; i++) {
    out->res_value[i] = 0.0;
    out->res_element[i] = 0;
  }
  int32_t qi[M3IDX_HEAD_DIM];
  for (int d = 0; d < M3IDX_HEAD_DIM; d++) {
    qi[d] = m3idx__cut_q(q[d], hq, negate);
    const double r = m3idx__cut_residual(q[d], hq, negate);
    if (r == 0.0 || out->residuals < 0)
      continue;
    if (out->residuals == M3IDX_CPU_CUT_RESIDUALS) {
      out->residuals = -1;
      continue;
    }
    out->res_value[out->residuals] = r;
    out->res_element[out->residuals++] = (uint8_t)d;
  }
  int32_t pi[M3IDX_HEAD_DIM];
  for (int d = 0; d < M3IDX_HEAD_DIM; d++)
    pi[d] = m3idx__cut_p(q[d], hq, negate);
  for (int g = 0; g < 4; g++) {
    int32_t sum = 0, sum_p = 0;
    for (int j = 0; j < 32; j++) {
      sum += qi[32 * g + j];
      sum_p += pi[32 * g + j];
    }
    for (int k = 0; k < 4; k++) {
      out->bias[4 * g + k] = M3IDX_CUT_CODE_BIAS * sum;
      out->bias_p[4 * g + k] = M3IDX_CUT_CODE_BIAS * sum_p;
    }
  }
  for (int i = 0; i < 16; i++) /* dword i of a key: elements 8i .. 8i + 7 */
    for (int h = 0; h < 2; h++) {
      uint32_t lo = 0u, hi = 0u, one = 0u;
      for (int b = 0; b < 4; b++) {
        const int32_t v = qi[8 * i + 2 * b + h];
        lo |= m3idx__cut_lo(v) << (8 * b);
        hi |= m3idx__cut_hi(v) << (8 * b);
        one |= ((uint32_t)pi[8 * i + 2 * b + h] & 255u) << (8 * b);
      }
      out->one_lo[h][i] = (int32_t)lo; /* the key's own order */
      out->one_hi[h][i] = (int32_t)hi;
      for (int k = 0; k < 4; k++) { /* a tile's: block i / 4, c = i % 4 */
        out->lo[2 * (i % 4) + h][4 * (i / 4) + k] = (int32_t)lo;
        out->hi[2 * (i % 4) + h][4 * (i / 4) + k] = (int32_t)hi;
        out->p[2 * (i % 4) + h][4 * (i / 4) + k] = (int32_t)one;
      }
    }
}
