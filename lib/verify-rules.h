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
 * where (1 + gamma) (A + dq) could reach 2^128, E is +inf.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_VERIFY_RULES_H
#define M3IDX_VERIFY_RULES_H

#include <math.h>

#include "spec-rules.h"

#define M3IDX_VERIFY_U 0x1p-23      /* fp32 roundoff, any rounding direction */
#define M3IDX_VERIFY_ETA 0x1p-126   /* an fp32 operation's absolute floor */
#define M3IDX_VERIFY_OPS 130        /* 127 additions, a product, scale, sigma */

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
  const double dq = rho * a_max + alpha * amax * k_max;
  if ((1.0 + gamma) * (a_max + dq) >= 0x1p128 || !(a_max == a_max))
    return INFINITY;
  const double s = fabs((double)scale);
  double e = s * (dq + gamma * (a_max + dq) + 300.0 * eta * (amax > 1.0 ? amax : 1.0)) + 2.0 * eta;
  const double ax = fabs(x) < INFINITY ? fabs(x) : 0.0;
  int ex;
  (void)frexp(ax, &ex); /* ax in [2^(ex-1), 2^ex): its fp32 ulp is 2^(ex-24) */
  const double ulp = ax >= 0x1p-126 ? ldexp(1.0, ex - 24) : 0x1p-149;
  e += tol_rel * ax + tol_ulps * ulp;
  return e * (1.0 + 0x1p-40);
}

/* Half an fp32 ulp of a rounded logit l: how far the exact value may be
 * from it (0 for a pinned or non-finite value, handled by the caller). */
M3IDX_RULE double m3idx__verify_half_ulp(float l) {
  const double a = fabs((double)l);
  int ex;
  (void)frexp(a, &ex);
  return a >= 0x1p-126 ? ldexp(1.0, ex - 25) : 0x1p-150;
}

#endif /* M3IDX_VERIFY_RULES_H */
