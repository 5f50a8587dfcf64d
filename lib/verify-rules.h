/*
 * verify-rules.h - SPEC section 13: how far another indexer's block score
 * may lie from the exact one under a stated arithmetic model, as one rule
 * for every backend and the front-end.  Derived in m3idx(7), VERIFYING.
 *
 * A candidate computes a key's logit as fl(scale * fl(sum of fl(q'[d] *
 * k[d]))) in fp32, in any order, each operation rounded in any direction
 * (unit roundoff u = 2^-23, truncation included) or to a subnormal or to
 * zero (an absolute error of at most eta = 2^-126 an operation); q' is the
 * row, or the row rounded first (to bf16 or e4m3, times a per-row scale
 * sigma with amax / sigma in [1, 448]: element errors within rho |q| +
 * alpha amax).  With A = sum |q[d] k[d]| and K = sum |k[d]| of the key and
 * amax = max |q[d]| of the row, the candidate's logit lies within
 *   E = |scale| (dq + gamma_130 (A + dq) + 300 eta max(1, amax)) + 2 eta,
 *   dq = rho A + alpha amax K,
 * of the exact scale * D: the query's rounding moves the exact sum by at
 * most dq; Higham's bound for recursive summation in any order (gamma_127)
 * with the products' and the scale multiply's roundings (and sigma's)
 * gives gamma_130 (1 + u) folded in; the absolute floors come from at most
 * 258 operations that may underflow, each at most eta, times |scale| and a
 * sigma <= amax.  A block's candidate score (the largest of its keys') is
 * then within the largest E of its causal keys; E grows with A and K, so
 * the block's largest A and largest K give a bound at least that large.
 * Products and partial sums are assumed to stay below fp32's overflow:
 * where (1 + gamma) (A + dq) could reach 2^128, or the row holds an inf or
 * NaN, E is +inf.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_VERIFY_RULES_H
#define M3IDX_VERIFY_RULES_H

#include <math.h>
#include <stdlib.h>

#include "spec-rules.h"

#define M3IDX_VERIFY_U 0x1p-23      /* fp32 roundoff, any rounding direction */
#define M3IDX_VERIFY_ETA 0x1p-126   /* an fp32 operation's absolute floor */
#define M3IDX_VERIFY_OPS 130        /* 127 additions, a product, scale, sigma */

/* 2^e as fp64 (e within fp64's normal range), from its bits. */
M3IDX_RULE double m3idx__verify_pow2(int32_t e) {
  return m3idx__bits_to_double((uint64_t)(1023 + e) << 52);
}

/* The fp32 ulp of a magnitude a in [2^-126, 2^128): 2^(its exponent - 23). */
M3IDX_RULE double m3idx__verify_ulp(double a) {
  const int32_t e = (int32_t)(m3idx__double_to_bits(a) >> 52) - 1023;
  return m3idx__verify_pow2(e - 23);
}

/* The query rounding a candidate may have made first: element errors
 * within rho |q| + alpha amax (round to nearest; e4m3 to its subnormals). */
M3IDX_RULE void m3idx__verify_query_rounding(int rounding, double *rho, double *alpha) {
  *rho = rounding == M3IDX_QUERY_ROUNDING_E4M3 ? 0x1p-4
       : rounding == M3IDX_QUERY_ROUNDING_BF16 ? 0x1p-9
                                                : 0.0;
  *alpha = rounding == M3IDX_QUERY_ROUNDING_E4M3 ? 0x1p-10
         : rounding == M3IDX_QUERY_ROUNDING_BF16 ? 0x1p-134
                                                  : 0.0;
}

/* E for a block whose causal keys have at most a_max = sum |q k| and
 * k_max = sum |k|, a row of largest magnitude amax; the user's tolerance
 * (tol_rel of |x|, tol_ulps fp32 ulps of x) on top.  Computed in fp64
 * from exact inputs with a relative slack of 2^-40, far above fp64's
 * roundings of these few operations, so it is never below the bound. */
M3IDX_RULE double m3idx__verify_bound(double a_max, double k_max, double amax, float scale,
                                      int rounding, double x, double tol_rel,
                                      double tol_ulps) {
  double rho, alpha;
  m3idx__verify_query_rounding(rounding, &rho, &alpha);
  const double u = M3IDX_VERIFY_U, eta = M3IDX_VERIFY_ETA;
  const double gamma = M3IDX_VERIFY_OPS * u / (1.0 - M3IDX_VERIFY_OPS * u);
  /* A row with an inf or NaN element bounds nothing (and 0 inf is NaN). */
  if (!(amax < INFINITY) || !(a_max == a_max))
    return INFINITY;
  const double dq = rho * a_max + alpha * amax * k_max;
  if ((1.0 + gamma) * (a_max + dq) >= 0x1p128)
    return INFINITY;
  const double s = fabs((double)scale);
  double e = s * (dq + gamma * (a_max + dq) + 300.0 * eta * (amax > 1.0 ? amax : 1.0)) + 2.0 * eta;
  const double ax = fabs(x) < INFINITY ? fabs(x) : 0.0;
  const double ulp = ax >= 0x1p-126 ? m3idx__verify_ulp(ax) : 0x1p-149;
  e += tol_rel * ax + tol_ulps * ulp;
  return e * (1.0 + 0x1p-40);
}

/* ---- the bound's terms: exact integers, the same bits on every backend --

 * A row's magnitudes |q[d]| are rounded up to integers qi[d] = ceil(|q[d]|
 * 2^s), s putting the row's largest into [2^14, 2^15), so that a key's
 * sum |q k| <= A = 2^-s sum_g 2^(e_g-128) sum_{d in g} qi[d] |halves(d)|:
 * each group's sum is an integer below 2^24, each group's term is exact in
 * fp64, and the four add in group order; A is at most amax K 2^-14 above
 * the sum.  K = sum_g 2^(e_g-128) sum |halves| exactly.  A key with a NaN
 * scale is skipped (its logit is NaN, which the block ignores). */

#define M3IDX_VERIFY_NO_SHIFT (-100000) /* a row with an inf or NaN element */

/* s for a row whose largest magnitude is amax (0 for a zero row). */
M3IDX_RULE int32_t m3idx__verify_shift(float amax) {
  if (!(amax < INFINITY))
    return M3IDX_VERIFY_NO_SHIFT;
  if (amax == 0.0f)
    return 0;
  int ex;
  (void)frexpf(amax, &ex); /* amax in [2^(ex-1), 2^ex) */
  return 15 - ex;
}

/* qi for one element q of a row with shift s (a finite row): |q| 2^s is
 * exact in fp64 (s is within [-114, 147]) and at most 2^15. */
M3IDX_RULE uint32_t m3idx__verify_query_int(float q, int32_t s) {
  const double v = fabs((double)q) * m3idx__bits_to_double((uint64_t)(1023 + s) << 52);
  const uint32_t i = (uint32_t)v;
  return i + ((double)i < v);
}

/* A row's integers qi (0 for a row with an inf or NaN element) and its
 * shift: the serial form of what the device does element by element. */
M3IDX_RULE int32_t m3idx__verify_row_ints(const float *q, uint32_t *qi) {
  float amax = 0.0f;
  for (int d = 0; d < M3IDX_HEAD_DIM; d++)
    amax = fabsf(q[d]) > amax || q[d] != q[d] ? fabsf(q[d]) : amax;
  const int32_t s = m3idx__verify_shift(amax);
  for (int d = 0; d < M3IDX_HEAD_DIM; d++)
    qi[d] = s == M3IDX_VERIFY_NO_SHIFT ? 0u : m3idx__verify_query_int(q[d], s);
  return s;
}

/* Group g's share of a key's A and K, from its integers gq = sum qi[d]
 * |halves(d)| and gk = sum |halves(d)| (each below 2^24, so each product
 * is exact in fp64): the groups add in group order. */
M3IDX_RULE void m3idx__verify_group_add(uint32_t gq, uint32_t gk, int g, int32_t s,
                                        const uint8_t *scales, double *a, double *k) {
  *a += (double)gq * m3idx__verify_pow2((int32_t)scales[g] - 128 - s);
  *k += (double)gk * m3idx__verify_pow2((int32_t)scales[g] - 128);
}

/* A key's A and K (terms[0], terms[1]) once its groups are added: A is
 * +inf for a row with an inf or NaN element. */
M3IDX_RULE void m3idx__verify_key_set(int32_t s, double a, double k, double *terms) {
  terms[0] = s == M3IDX_VERIFY_NO_SHIFT ? INFINITY : a;
  terms[1] = k;
}

/* A key's A and K from its groups' integers gq[g], gk[g]; a key with a
 * NaN scale gives -1, -1 (below every real term). */
M3IDX_RULE void m3idx__verify_key_combine(const uint32_t *gq, const uint32_t *gk, int32_t s,
                                          const uint8_t *scales, double *terms) {
  if (m3idx__key_spread(scales) == 255) {
    terms[0] = terms[1] = -1.0;
    return;
  }
  double a = 0.0, k = 0.0;
  for (int g = 0; g < 4; g++)
    m3idx__verify_group_add(gq[g], gk[g], g, s, scales, &a, &k);
  m3idx__verify_key_set(s, a, k, terms);
}

/* A key's A and K from the row's qi and shift, group by group (the same
 * additions as m3idx__verify_key_combine, which the NVIDIA kernels feed
 * from dp4a). */
M3IDX_RULE void m3idx__verify_key_terms(const uint32_t *qi, int32_t s, const uint8_t *data,
                                        const uint8_t *scales, double *terms) {
  if (m3idx__key_spread(scales) == 255) {
    terms[0] = terms[1] = -1.0;
    return;
  }
  double a = 0.0, k = 0.0;
  for (int g = 0; g < 4; g++) {
    uint32_t gq = 0, gk = 0;
    for (int d = 32 * g; d < 32 * g + 32; d++) {
      const uint32_t m = (uint32_t)abs(m3idx__e2m1_halves(m3idx__code_at(data, d)));
      gq += qi[d] * m;
      gk += m;
    }
    m3idx__verify_group_add(gq, gk, g, s, scales, &a, &k);
  }
  m3idx__verify_key_set(s, a, k, terms);
}

/* A block's terms: the largest A and K over `keys' keys (codes 64 bytes a
 * key, scales 4), 0, 0 when every key's scale is NaN. */
M3IDX_RULE void m3idx__verify_block_terms(const uint32_t *qi, int32_t s, const uint8_t *codes,
                                          const uint8_t *scales, int32_t keys, double *out) {
  double a_max = 0.0, k_max = 0.0;
  for (int32_t t = 0; t < keys; t++) {
    double t2[2];
    m3idx__verify_key_terms(qi, s, codes + 64 * t, scales + 4 * t, t2);
    a_max = t2[0] > a_max ? t2[0] : a_max;
    k_max = t2[1] > k_max ? t2[1] : k_max;
  }
  out[0] = a_max;
  out[1] = k_max;
}

/* The key of a block's first `keys' (scale bytes 4 a key) whose terms are
 * its floor: the first
 * of the largest scale byte among keys without a NaN scale (the group
 * of the largest scale mostly decides a key's A); -1 when there is none.
 * Its terms are below no block's terms (each is a largest over keys). */
M3IDX_RULE int32_t m3idx__verify_floor_key(const uint8_t *scales, int32_t keys) {
  int32_t best = -1, best_e = -1;
  for (int32_t t = 0; t < keys; t++) {
    const uint8_t *sc = scales + 4 * t;
    const int32_t spread = m3idx__key_spread(sc);
    int32_t e = sc[0];
    for (int g = 1; g < 4; g++)
      e = sc[g] > e ? sc[g] : e;
    if (spread != 255 && e > best_e) {
      best_e = e;
      best = t;
    }
  }
  return best;
}

/* A block's floor: the terms of its floor key (0, 0 without one). */
M3IDX_RULE void m3idx__verify_floor_terms(const uint32_t *qi, int32_t s, const uint8_t *page,
                                          int32_t keys, double *out) {
  const int32_t t = m3idx__verify_floor_key(page + M3IDX_PAGE_DATA_BYTES, keys);
  out[0] = out[1] = 0.0;
  if (t >= 0)
    m3idx__verify_key_terms(qi, s, page + 64 * t, page + M3IDX_PAGE_DATA_BYTES + 4 * t, out);
}

/* A lower bound of a block's A from its rounded score x (finite, not
 * pinned): |x| <= |scale| A (1 + 2^-24) + 2^-150, so this never exceeds
 * the true sum and the bound it gives never exceeds the block's bound. */
M3IDX_RULE double m3idx__verify_a_floor(float x, float scale) {
  const double ax = fabs((double)x) - 0x1p-149, s = fabs((double)scale);
  return ax > 0.0 && s > 0.0 ? ax / s * (1.0 - 0x1p-20) : 0.0;
}

/* Half an fp32 ulp of a rounded logit l: how far the exact value may be
 * from it (0 for a pinned or non-finite value, handled by the caller). */
M3IDX_RULE double m3idx__verify_half_ulp(float l) {
  const double a = fabs((double)l);
  return a >= 0x1p-126 ? 0.5 * m3idx__verify_ulp(a) : 0x1p-150;
}

#endif /* M3IDX_VERIFY_RULES_H */
