/*
 * filter-cut.h - the integer filter's row cut and its error bound, written
 * once for the CPU's vnni kernel (lib-cpu/row-digits.c), the NVIDIA
 * scoring kernels (lib-gpu/vendor-nvidia.h) and the matrix-core kernels
 * (lib-gpu/score-gemm.hip, lib-gpu/score-mfma.hip).
 *
 * A row is cut to integers Q = q * 2^(13 - Hq), truncated toward zero (Hq:
 * floor(log2) of its largest |element|, so |Q| < 2^14), held in two signed
 * 8-bit digit planes, Q = 256 hi + lo.  A key's codes enter as their value
 * in halves plus M3IDX_CUT_CODE_BIAS (unsigned bytes for u8 x s8 dot
 * products); each group's bias * sum Q is taken off again.
 *
 * The bound: each Q differs from q * 2^(13 - Hq) by less than 1, and k =
 * halves * 2^(e_g - 128) with |halves| <= 12, so in units of U = 2^(Hq -
 * 13) * 2^(emax - 128) (emax: the page's largest scale byte but 255) a
 * key's D / U differs from sum_g S_g * 2^(e_g - emax) by at most 4 * 32 *
 * 12 = 1536, S_g being the group's exact integer sum of Q times the
 * halves.  NVIDIA forms A in fp32: |S_g| < 2^23, so its conversion is
 * exact; the products with the scales are exact where 2^(e_g - emax) is
 * an fp32 normal, and below them a factor taken as 2^-126 moves
 * the term by less than 2^23 * 2^-126 = 2^-103; the three fp32 adds (or
 * fused multiply-adds of those exact products) lose at most 3 * 2^-24 *
 * 2^25 = 6.  The CPU forms A in integers: each S_g shifted right by emax -
 * e_g (arithmetically, so the floor of S_g * 2^(e_g - emax), less than 1
 * below it), then added exactly (|A| < 2^25), which loses less than 4.
 * Either way |A - D / U| <= 1543 < M3IDX_CUT_ERROR.
 *
 * The cut also gives a key's exact D, for the keys that pass the filter
 * (the CPU's vnni kernel): with z = q * 2^(13 - Hq) (negated as Q is), the
 * residual r = z - Q is exact in fp64, and x_g = S_g + sum r * halves over
 * the group is sum z * halves, so D = 2^(Hq - 141 + emin) * sum_g
 * 2^(e_g - emin) * x_g (the halves are 2 k / 2^(e_g - 127)).  Every z, so
 * every r and every partial sum, is a multiple of 2^(13 - span) (span: the
 * row's Hq - Lq of lib/spec-rules.h), and the partial sums stay below
 * 2^23 + 2^9 (within a group: |S_g| < 32 * 12 * 2^14 = 1.5 * 2^22, each |r|
 * < 1) and 2^(25 + spread) (over the groups: each |x_g| < 2^23; the
 * CPU adds the residuals' products of all groups, each times its group's
 * 2^(e_g - emin), apart, below 16 * 12 * 2^spread, and then to the sum of
 * the S_g terms, below 1.5 * 2^(24 + spread)); so with
 * span + spread <= M3IDX_FP64_EXACT_SPAN (41), the condition of the fp64
 * sums, fp64 holds each of them exactly, in any order, and the final power
 * of two (2^-274 .. 2^240) neither overflows nor underflows.
 *
 * The tensor-core filter (lib-gpu/gemm-parts.h) cuts one bit shorter,
 * Q = q * 2^(12 - Hq) truncated (|Q| < 2^13, the high digit -32 .. 32),
 * so that a group's exact integer sum S_g, |S_g| < 2^13 * 12 * 32 <
 * 2^22, comes out of the MMA added to the bits of 1.5 * 2^23 and so reads
 * as the float T_g = 1.5 * 2^23 + S_g, exactly.  With F_g = 2^(e_g - emax)
 * (2^-126 below fp32's normals) and C = 1.5 * 2^23 * sum_g F_g formed by
 * fused multiply-adds, A = -C + sum_g T_g F_g, one fused multiply-add a
 * group.  In units U = 2^(Hq - 12) * 2^(emax - 128) the cut moves D / U
 * by at most 1536 as above; every T_g F_g is exact (at least 2^-103), C's
 * three adds (below 2^26) lose at most 2 each and A's four (partial sums
 * below 2^26, the magic parts cancelling) as much, and a factor taken as
 * 2^-126 moves its term by less than 2^22 * 2^-126: |A - D / U| <= 1536 +
 * 6 + 8 + 2^-100 < M3IDX_CUT_ERROR.
 *
 * That bound is the worst key's.  A key's own is tighter: each |Q - z| <
 * 1 and each |halves| <= 12 move its group g by less than 384 F_g, so
 * with e_k = m3idx__gemm_key_error(sum_g F_g) the tensor-core kernels
 * start A at -C - e_k (one add more, below 2^26: 2 more at most) and get
 * L_k with D_k / U in [L_k, L_k + 2 e_k].  The key of the largest D then
 * has L_k + 2 e_k >= max_j L_j, and the fp32 sum L_k + 2 e_k (rounded to
 * nearest, monotonic) keeps that against the float max_j L_j, so that
 * test needs no margin.  On the bench's pages, whose scale bytes spread
 * over 15 values, sum F_g is 0.5 on average against the 4 of the worst key.
 * tests/check-filter-bound.c checks that interval on the CPU against exact
 * sums, on random keys and on a row and key that push the cut's error
 * to 1512 of the 1560 a key of four factors 1 is allowed.
 *
 * A page of several rows is filtered on one plane first (the CPU's vnni
 * kernel): P = q * 2^(6 - Hq) * 127/128 rounded to nearest (|P| <= 127,
 * within 1/2 of it; negated as Q is).  In units of 2^-7 P, with S'_g the
 * group's integer sum of P times the halves and E_g = sum |halves| of the
 * key's group g, H = sum_g floor(128 S'_g * 2^(e_g - emax)) is within
 * B = sum_g floor(64 E_g * 2^(e_g - emax)) + 8 of D' = D * c (c > 0, the
 * same for every key of the row): each 128 P is within 64 of z' = 128 q *
 * 2^(6 - Hq) * 127/128, and the floors lose less than 4 and 4.  So the key
 * of the largest D has H + B >= max(H - B) over the keys, and only the
 * keys that pass that test need A.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_FILTER_CUT_H
#define M3IDX_FILTER_CUT_H

#include "spec-rules.h"

#define M3IDX_CUT_ERROR 1600.0f
/* The key of the largest D has A >= max A - 2 * M3IDX_CUT_ERROR; 64 more
 * cover the fp32 rounding of that subtraction (|A| < 2^25; the CPU's
 * integer A needs none). */
#define M3IDX_CUT_MARGIN (2.0f * M3IDX_CUT_ERROR + 64.0f)
#define M3IDX_CUT_CODE_BIAS 12

/* Hq of a row whose largest |element| has the bits top (finite, nonzero;
 * subnormals included). */
M3IDX_RULE int32_t m3idx__cut_exponent(uint32_t top) {
  return top >= 0x00800000u ? (int32_t)(top >> 23) - 127 : 31 - m3idx__clz32(top | 1u) - 149;
}

/* e_k of a key whose four factors F_g = 2^(e_g - emax) (or 2^-126) add
 * up to sum_f (each within 2^-24 of its share: three fp32 adds): 384
 * sum F_g for the cut, 16 for the fp32 rounding of C and A, 8 for that
 * of this sum and of 2^-126 factors. */
M3IDX_RULE float m3idx__gemm_key_error(float sum_f) { return 384.0f * sum_f + 24.0f; }

/* The cut's top bit: 13 for the integer filter, 12 for the tensor-core
 * filter's (whose group sums must stay below 2^22). */
#define M3IDX_CUT_BITS 13
#define M3IDX_GEMM_CUT_BITS 12

/* The tensor-core filter's magic: a group's sum S (|S| < 2^22) added to
 * the bits of 1.5 * 2^23 reads as the float 1.5 * 2^23 + S. */
#define M3IDX_GEMM_MAGIC_BITS 0x4b400000
#define M3IDX_GEMM_MAGIC 12582912.0f

/* The tensor-core filter's factors of a key of scale word sc on a page of
 * emax: f[g] = F_g = 2^(e_g - emax) (2^-126 below fp32's normals) times
 * sign (+-1: sign(scale)), 0 for a NaN scale; start = -C - e_k, C = 1.5 *
 * 2^23 * sum F_g by fused multiply-adds, so that A = start + sum_g T_g F_g
 * (a fused multiply-add a group, in group order) is the low end L_k of
 * the key's interval (-inf for a NaN scale: its logit is NaN, ignored);
 * width = 2 e_k, the interval's width. */
M3IDX_RULE void m3idx__gemm_key_factors(uint32_t sc, int32_t emax, float sign, float f[4],
                                        float *start, float *width) {
  const int nan = m3idx__nan_scale_bytes(sc) != 0u;
  for (int g = 0; g < 4; g++) {
    const int32_t e = (int32_t)((sc >> (8 * g)) & 255u) + (127 - emax);
    f[g] = nan ? 0.0f : sign * m3idx__bits_to_float((uint32_t)(e > 1 ? e : 1) << 23);
  }
  float cm = M3IDX_GEMM_MAGIC * f[0];
  for (int g = 1; g < 4; g++)
    cm = fmaf(M3IDX_GEMM_MAGIC, f[g], cm);
  const float e_k =
      m3idx__gemm_key_error((fabsf(f[0]) + fabsf(f[1])) + (fabsf(f[2]) + fabsf(f[3])));
  *start = nan ? -INFINITY : -cm - e_k;
  *width = 2.0f * e_k;
}

/* z = q * 2^(bits - hq) of element q (finite) of a row of exponent hq,
 * negated if asked: exact in fp64. */
M3IDX_RULE double m3idx__cut_z_at(float q, int32_t hq, int bits, int negate) {
  const double f = m3idx__bits_to_double((uint64_t)(1023 + bits - hq) << 52);
  return (double)q * (negate ? -f : f);
}
M3IDX_RULE double m3idx__cut_z(float q, int32_t hq, int negate) {
  return m3idx__cut_z_at(q, hq, M3IDX_CUT_BITS, negate);
}

/* Q of the element: z truncated toward zero. */
M3IDX_RULE int32_t m3idx__cut_q_at(float q, int32_t hq, int bits, int negate) {
  return (int32_t)m3idx__cut_z_at(q, hq, bits, negate);
}
M3IDX_RULE int32_t m3idx__cut_q(float q, int32_t hq, int negate) {
  return m3idx__cut_q_at(q, hq, M3IDX_CUT_BITS, negate);
}

/* Q of an element that may be NaN or infinite (0 then: a row with such
 * elements is not filtered, its digits go unused). */
M3IDX_RULE int32_t m3idx__cut_q_finite(float q, int32_t hq, int bits) {
  return (m3idx__float_to_bits(q) & 0x7fffffffu) >= 0x7f800000u ? 0
                                                                  : m3idx__cut_q_at(q, hq, bits, 0);
}

/* The residual z - Q of the element: exact, |r| < 1. */
M3IDX_RULE double m3idx__cut_residual(float q, int32_t hq, int negate) {
  const double z = m3idx__cut_z(q, hq, negate);
  return z - (double)(int32_t)z;
}

/* The low digit of Q (-128 .. 127) and the high one (-64 .. 64), as bytes. */
M3IDX_RULE uint32_t m3idx__cut_lo(int32_t v) { return (uint32_t)v & 255u; }
M3IDX_RULE uint32_t m3idx__cut_hi(int32_t v) {
  return (uint32_t)((v - (int32_t)(int8_t)(uint8_t)v) / 256) & 255u;
}

/* P of the element of a row of exponent hq (|P| <= 127, within 1/2 of
 * q * 2^(6 - hq) * 127/128, which fp64 holds exactly), negated if asked. */
M3IDX_RULE int32_t m3idx__cut_p(float q, int32_t hq, int negate) {
  const double f = m3idx__bits_to_double((uint64_t)(1023 + 6 - 7 - hq) << 52);
  const double z = (double)q * 127.0 * (negate ? -f : f);
  const int32_t t = (int32_t)z; /* toward zero; z - t is exact */
  const double r = z - (double)t;
  return r > 0.5 ? t + 1 : r < -0.5 ? t - 1 : t;
}

#endif /* M3IDX_FILTER_CUT_H */
