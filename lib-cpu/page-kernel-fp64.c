/*
 * page-kernel-fp64.c - the portable fast page kernel: a key's D summed in
 * fp64 where that provably cannot round (the row's span plus the key's
 * scale spread, lib/spec-rules.h), exactly otherwise; each row keeps its
 * best D and rounds it once a block.  Each key is decoded once for all
 * the rows that read it.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include "cpu.h"
#include "spec-rules.h"

/* D of one key for one row, in fp64: the group sums in any order (they
 * are exact), then each times its scale. */
static double key_dot(const double *k, const double *scales, const float *q) {
  double d = 0.0;
  for (int g = 0; g < 4; g++) {
    double acc = 0.0;
    for (int j = 0; j < 32; j++)
      acc += (double)q[32 * g + j] * k[32 * g + j];
    d += acc * scales[g];
  }
  return d;
}

void m3idx__cpu_page_scores_fp64(const uint8_t *page, const uint8_t *ahead,
                                 const struct m3idx_cpu_row *rows, int nrows,
                                 float scale) {
  (void)ahead;
  struct m3idx__block_best best[M3IDX_CPU_ROW_BATCH];
  int kmax = 0;
  for (int r = 0; r < nrows; r++) {
    m3idx__best_start(&best[r]);
    kmax = rows[r].nkeys > kmax ? rows[r].nkeys : kmax;
  }
  for (int t = 0; t < kmax; t++) {
    const uint8_t *data = page + 64 * t, *sc = page + M3IDX_PAGE_DATA_BYTES + 4 * t;
    const int32_t spread = m3idx__key_spread(sc);
    if (spread == 255) /* a NaN scale: every row's logit is NaN, ignored */
      continue;
    double k[M3IDX_HEAD_DIM], scales[4];
    for (int i = 0; i < 64; i++) {
      k[2 * i] = m3idx__e2m1_value(data[i] & 15u);
      k[2 * i + 1] = m3idx__e2m1_value((uint32_t)data[i] >> 4);
    }
    for (int g = 0; g < 4; g++)
      scales[g] = m3idx__e8m0_double(sc[g]);
    for (int r = 0; r < nrows; r++) {
      if (t >= rows[r].nkeys)
        continue;
      if (spread <= rows[r].spread)
        m3idx__best_take_d(&best[r], key_dot(k, scales, rows[r].q), scale);
      else
        m3idx__best_take_logit(&best[r], m3idx__exact_logit_of_row(rows[r].q, rows[r].spread,
                                                                    page + 64 * t, sc, scale));
    }
  }
  for (int r = 0; r < nrows; r++)
    *rows[r].out = m3idx__cpu_best_score(&best[r], scale);
}
