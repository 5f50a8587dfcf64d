/*
 * page-kernel-scalar.c - the portable page kernel: SPEC section 4 written
 * out key by key.  Every other kernel must return its bytes.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include "cpu.h"
#include "formats.h"

/* Decode slot t: 128 e2m1 values and 4 e8m0 scales. */
static void decode_key(const uint8_t *page, int t, float *k, float *sc) {
  const uint8_t *data = page + 64 * t;
  const uint8_t *scales = page + M3IDX_PAGE_DATA_BYTES + 4 * t;
  for (int i = 0; i < 64; i++) {
    k[2 * i] = m3idx__e2m1_value((uint8_t)(data[i] & 15u));
    k[2 * i + 1] = m3idx__e2m1_value((uint8_t)(data[i] >> 4));
  }
  for (int g = 0; g < 4; g++)
    sc[g] = m3idx__e8m0_value(scales[g]);
}

/* SPEC section 4, steps 2-5: four sums in element order, the scale
 * products, the pairwise combine, the call's scale; -0 counts as +0. */
static float key_logit(const float *q, const float *k, const float *sc,
                       float scale) {
  float s[4];
  for (int g = 0; g < 4; g++) {
    float acc = 0.0f;
    for (int j = 0; j < 32; j++)
      acc = acc + q[32 * g + j] * k[32 * g + j];
    s[g] = acc * sc[g];
  }
  float logit = ((s[0] + s[1]) + (s[2] + s[3])) * scale;
  return logit == 0.0f ? 0.0f : logit;
}

void m3idx__cpu_page_scores_scalar(const uint8_t *page, const uint8_t *next,
                                   const struct m3idx_cpu_row *rows, int nrows,
                                   float scale) {
  struct m3idx_cpu_maxima m;
  int kmax = m3idx__cpu_maxima_start(&m, rows, nrows);
  for (int t = 0; t < kmax; t++) {
    if (next != NULL) { /* the next page: a line of keys a key, its 8 lines of scales first */
      __builtin_prefetch(next + 64 * t);
      if (t < 8)
        __builtin_prefetch(next + M3IDX_PAGE_DATA_BYTES + 64 * t);
    }
    float k[M3IDX_HEAD_DIM], sc[4];
    decode_key(page, t, k, sc);
    for (int r = 0; r < nrows; r++) {
      if (t >= rows[r].nkeys)
        continue;
      float logit = key_logit(rows[r].q, k, sc, scale);
      if (logit == logit) /* NaN logits are ignored */
        m3idx__cpu_maxima_take(&m, r, logit);
    }
  }
  m3idx__cpu_maxima_store(&m, rows, nrows);
}
