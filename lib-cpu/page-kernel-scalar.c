/*
 * page-kernel-scalar.c - the plain page kernel, the one to check SPEC
 * section 4 against: every key's D summed exactly in a fixed-point
 * accumulator (lib/spec-rules.h), times the scale, rounded once.  Every
 * other kernel must return its bytes.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include "cpu.h"
#include "spec-rules.h"

float m3idx__cpu_exact_logit(const uint8_t *page, int t, const float *q, float scale) {
  struct m3idx__exact_sum d;
  m3idx__exact_dot(q, page + 64 * t, page + M3IDX_PAGE_DATA_BYTES + 4 * t, &d);
  return m3idx__round_exact(&d, scale);
}

float m3idx__cpu_best_score(const struct m3idx_cpu_best *b, float scale) {
  float s = b->have_logit ? b->logit : m3idx__bits_to_float(M3IDX_NAN_BITS);
  if (b->have_d) {
    const float l = m3idx__round_scaled(b->d, scale);
    if (!b->have_logit || l > s)
      s = l;
  }
  return m3idx__clamp(s);
}

void m3idx__cpu_page_scores_scalar(const uint8_t *page, const uint8_t *next,
                                   const struct m3idx_cpu_row *rows, int nrows,
                                   float scale) {
  (void)next;
  for (int r = 0; r < nrows; r++) {
    struct m3idx_cpu_best b;
    m3idx__cpu_best_start(&b);
    for (int t = 0; t < rows[r].nkeys; t++)
      m3idx__cpu_best_take_logit(&b, m3idx__cpu_exact_logit(page, t, rows[r].q, scale));
    *rows[r].out = m3idx__cpu_best_score(&b, scale);
  }
}
