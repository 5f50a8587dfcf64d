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

float m3idx__cpu_best_score(const struct m3idx__block_best *b, float scale) {
  return m3idx__clamp(m3idx__best_logit(b, scale));
}

void m3idx__cpu_page_scores_scalar(const uint8_t *page, const uint8_t *ahead,
                                   const struct m3idx_cpu_row *rows, int nrows,
                                   float scale) {
  (void)ahead;
  for (int r = 0; r < nrows; r++) {
    struct m3idx__block_best b;
    m3idx__best_start(&b);
    for (int t = 0; t < rows[r].nkeys; t++)
      m3idx__best_take_logit(&b, m3idx__exact_logit(rows[r].q, page + 64 * t,
                                                    page + M3IDX_PAGE_DATA_BYTES + 4 * t, scale));
    *rows[r].out = m3idx__cpu_best_score(&b, scale);
  }
}
