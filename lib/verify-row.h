/*
 * verify-row.h - the pieces of one row's verdict (SPEC section 13), shared
 * by the front-end (lib/verify.c, row by row on the host) and the HIP
 * backend (lib-gpu/verify-rows.hip, a block of threads a row): each
 * block's interval of possible scores, a candidate score's deviation,
 * the gap between two blocks, and the structural checks of the ids.
 * Each backend combines them with exact maxima and minima only, so the
 * verdicts are the same bits wherever they are decided.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_VERIFY_ROW_H
#define M3IDX_VERIFY_ROW_H

#include "verify-rules.h"

/* A block's possible scores: [lo, hi], its reference value x and bound e
 * (E plus half an ulp of the rounded reference). */
struct m3idx_verify_interval {
  double lo, hi, x, e;
};

#define M3IDX_VERIFY_CLAMP_MAX 0x1.43e1eep+96        /* 0x6fa18f07: SPEC section 6's clamp */
#define M3IDX_VERIFY_NAN_RANK (-INFINITY)            /* a NaN block, below every number */
#define M3IDX_VERIFY_NEG_INF_RANK (-0x1.fffffffffffffp+1023) /* a -inf score: above NaN */

M3IDX_RULE int m3idx__verify_is_forced(int32_t b, int32_t n, int32_t init, int32_t local) {
  return b < init || b >= n - local;
}

/* Whether block b's interval is known without its terms: a NaN or -inf
 * reference, or a block pinned by the forced rule. */
M3IDX_RULE int m3idx__verify_fixed(float ref, int forced) {
  return ref != ref || ref == -INFINITY || forced;
}

/* The interval of a block: ref its pinned, clamped reference score,
 * forced whether pinning wrote it, a and k its bound terms (or a floor
 * of them, which gives an interval never wider), amax the row's largest
 * magnitude. */
M3IDX_RULE struct m3idx_verify_interval
m3idx__verify_interval(float ref, int forced, double a, double k, double amax, float scale,
                       const m3idx_verify_options *o) {
  struct m3idx_verify_interval v;
  v.x = ref;
  v.e = 0.0;
  if (ref != ref) {
    v.lo = v.hi = v.x = M3IDX_VERIFY_NAN_RANK;
    return v;
  }
  if (forced || ref == -INFINITY) {
    v.lo = v.hi = v.x = ref == -INFINITY ? M3IDX_VERIFY_NEG_INF_RANK : (double)ref;
    return v;
  }
  const double e = m3idx__verify_bound(a, k, amax, scale, o->query_rounding, ref,
                                       o->tolerance_rel, o->tolerance_ulps);
  /* The exact score is within half an ulp of its rounding; the margin
     covers this function's own fp64 roundings. */
  v.e = (m3idx__verify_half_ulp(ref) + e) * (1.0 + 0x1p-20);
  v.lo = (double)ref - v.e;
  v.hi = (double)ref + v.e < M3IDX_VERIFY_CLAMP_MAX ? (double)ref + v.e : M3IDX_VERIFY_CLAMP_MAX;
  return v;
}

/* A block's interval from the floor its reference score gives alone
 * (m3idx__verify_a_floor): what every backend may look at first. */
M3IDX_RULE struct m3idx_verify_interval
m3idx__verify_score_floor(float ref, int forced, double amax, float scale,
                          const m3idx_verify_options *o) {
  const double a = m3idx__verify_fixed(ref, forced) ? 0.0 : m3idx__verify_a_floor(ref, scale);
  return m3idx__verify_interval(ref, forced, a, 0.0, amax, scale, o);
}

/* Whether a candidate score s is inside the interval of a block with the
 * unpinned reference x (finite, clamped) without its terms: within 64
 * fp32 ulps of an |x| >= 2^-100, for a finite scale other than 0.  E is
 * then at least |scale| gamma_130 A >= gamma_130 |x| (1 - 2^-19) > 129
 * ulps of x (A is at least the a-floor of x), so the interval reaches
 * past s (and a rank clamped to x's ceiling stays below its top). */
M3IDX_RULE int m3idx__verify_near(float x, float s, float scale) {
  const double ax = fabs((double)x), sc = fabs((double)scale);
  return ax >= 0x1p-100 && x <= M3IDX_VERIFY_CLAMP_MAX && sc > 0.0 && sc < INFINITY &&
         fabs((double)s - (double)x) <= 64.0 * m3idx__verify_ulp(ax);
}

/* A score's place in the order of intervals: NaN lowest, then -inf. */
M3IDX_RULE double m3idx__verify_rank(float f) {
  const double s = f;
  return s != s                    ? M3IDX_VERIFY_NAN_RANK
         : s == -INFINITY          ? M3IDX_VERIFY_NEG_INF_RANK
         : s > M3IDX_VERIFY_CLAMP_MAX ? M3IDX_VERIFY_CLAMP_MAX
                                   : s;
}

/* A candidate score's deviation from the block's reference, in bounds. */
M3IDX_RULE double m3idx__verify_deviation(double s, const struct m3idx_verify_interval *v) {
  return s == v->x ? 0.0 : v->e > 0.0 ? fabs(s - v->x) / v->e : INFINITY;
}

M3IDX_RULE int m3idx__verify_inside(double s, const struct m3idx_verify_interval *v) {
  return s >= v->lo && s <= v->hi;
}

/* The gap between a block taken (a) and one that beats it (b), in bounds. */
M3IDX_RULE float m3idx__verify_gap(const struct m3idx_verify_interval *a,
                                   const struct m3idx_verify_interval *b) {
  const double den = a->e + b->e;
  return den > 0.0 ? (float)((b->x - a->x) / den) : INFINITY;
}

/* The ids' own check of slot j (SPEC section 13): the reason, or NONE. */
M3IDX_RULE int32_t m3idx__verify_slot(const int32_t *cand, int32_t n, int32_t j) {
  const int32_t count = n < M3IDX_TOPK ? n : M3IDX_TOPK, c = cand[j];
  if (j >= count)
    return c != -1 ? M3IDX_REASON_PADDING : M3IDX_REASON_NONE;
  if (c == -1)
    return M3IDX_REASON_COUNT;
  if (c < 0 || c >= n)
    return M3IDX_REASON_ID_RANGE;
  for (int32_t i = 0; i < j; i++)
    if (cand[i] == c)
      return M3IDX_REASON_DUPLICATE;
  return M3IDX_REASON_NONE;
}

/* The first slot at fault: its reason (NONE when every slot passes), with
 * the slot and its id (-1, -1 when none is). */
M3IDX_RULE int32_t m3idx__verify_slots(const int32_t *cand, int32_t n, int32_t *slot,
                                       int32_t *id) {
  for (int32_t j = 0; j < M3IDX_TOPK; j++) {
    const int32_t reason = m3idx__verify_slot(cand, n, j);
    if (reason != M3IDX_REASON_NONE) {
      *slot = j;
      *id = cand[j];
      return reason;
    }
  }
  *slot = *id = -1;
  return M3IDX_REASON_NONE;
}

/* Whether block b is among the candidate's first `count' ids. */
M3IDX_RULE int m3idx__verify_taken(const int32_t *cand, int32_t count, int32_t b) {
  int found = 0;
  for (int32_t j = 0; j < count; j++)
    found |= cand[j] == b;
  return found;
}

/* The forced blocks of a row of n: i-th of them, for i below the count
 * (SPEC section 6: 0 .. I-1, then n-L .. n-1, each once). */
M3IDX_RULE int32_t m3idx__verify_forced_count(int32_t n, int32_t init, int32_t local) {
  const int32_t init_end = init < n ? init : n;
  const int32_t local_start = n - local > init_end ? n - local : init_end;
  return init_end + (n - local_start);
}

M3IDX_RULE int32_t m3idx__verify_forced_block(int32_t i, int32_t n, int32_t init,
                                              int32_t local) {
  const int32_t init_end = init < n ? init : n;
  const int32_t local_start = n - local > init_end ? n - local : init_end;
  return i < init_end ? i : local_start + (i - init_end);
}

#endif /* M3IDX_VERIFY_ROW_H */
