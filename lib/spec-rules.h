/*
 * spec-rules.h - SPEC's bit rules, written once for the C library and for
 * the HIP/CUDA compilers: the element formats (section 2), the exact score
 * rounded once (section 4), the clamp and the sentinels (section 6) and the
 * top-k rank key (section 7).  The work map's encoding is in work-map.h and
 * the constants in m3idx.h; both are shared the same way.
 *
 * Everything here is integer arithmetic or single IEEE operations in
 * round-to-nearest (the CPU backend enters that mode, lib/fp-env.h),
 * so host and device get the same bits.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_SPEC_RULES_H
#define M3IDX_SPEC_RULES_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "m3idx.h"

#if defined(__CUDACC__) || defined(__HIPCC__)
#define M3IDX_RULE static inline __host__ __device__
#else
#define M3IDX_RULE static inline
#endif

/* ---- bits ---------------------------------------------------------------- */

M3IDX_RULE float m3idx__bits_to_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

M3IDX_RULE uint32_t m3idx__float_to_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

M3IDX_RULE double m3idx__bits_to_double(uint64_t u) {
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

M3IDX_RULE uint64_t m3idx__double_to_bits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

#define M3IDX_NAN_BITS 0x7fc00000u /* the one NaN every backend writes */

/* ---- section 2: element formats, decoded exactly ------------------------ */

M3IDX_RULE float m3idx__bf16_value(uint16_t x) {
  return m3idx__bits_to_float((uint32_t)x << 16);
}

/* OCP E4M3 "fn": bias 7, subnormals, S.1111.111 is NaN, no infinities. */
M3IDX_RULE float m3idx__e4m3_value(uint8_t x) {
  const uint32_t sign = (uint32_t)(x >> 7) << 31;
  const uint32_t e = (x >> 3) & 15u, m = x & 7u;
  if (e == 15u && m == 7u)
    return m3idx__bits_to_float(sign | M3IDX_NAN_BITS);
  if (e == 0u) /* m * 2^-9: an fp32 normal, built from its bits */
    return m3idx__bits_to_float(m == 0u ? sign
                                : m >= 4u ? sign | (120u << 23) | ((m & 3u) << 21)
                                : m >= 2u ? sign | (119u << 23) | ((m & 1u) << 22)
                                          : sign | (118u << 23));
  return m3idx__bits_to_float(sign | ((e + 120u) << 23) | (m << 20));
}

/* Element d's e2m1 code in a key's 64 data bytes (SPEC section 3: element
 * d in byte d / 2, the low nibble for even d). */
M3IDX_RULE uint32_t m3idx__code_at(const uint8_t *data, int d) {
  return (uint32_t)(d & 1 ? data[d / 2] >> 4 : data[d / 2] & 15u);
}

/* e2m1 code (low 4 bits) in units of 1/2: 0, 1, 2, 3, 4, 6, 8, 12, signed. */
M3IDX_RULE int32_t m3idx__e2m1_halves(uint32_t code) {
  const int32_t mag = (int32_t)((0xc8643210u >> (4u * (code & 7u))) & 15u);
  return (code & 8u) ? -mag : mag;
}

/* fp32 bits of an e2m1 code: sign, then 0 -> 0, 1 -> 0.5, x >= 2 ->
 * (x << 22) + the bits of 0.5. */
M3IDX_RULE uint32_t m3idx__e2m1_bits(uint32_t code) {
  const uint32_t x = code & 7u;
  const uint32_t mag = x >= 2u ? (x << 22) + 0x3f000000u : (x ? 0x3f000000u : 0u);
  return ((code & 8u) << 28) | mag;
}

M3IDX_RULE float m3idx__e2m1_value(uint32_t code) {
  return m3idx__bits_to_float(m3idx__e2m1_bits(code));
}

/* 2^(e-127); e = 0 is the fp32 subnormal 2^-127; e = 255 is NaN. */
M3IDX_RULE float m3idx__e8m0_value(uint8_t e) {
  return m3idx__bits_to_float(e == 255u ? M3IDX_NAN_BITS : e == 0u ? 0x00400000u
                                                                  : (uint32_t)e << 23);
}

/* 2^(e-127) as fp64 (e < 255), exact and normal. */
M3IDX_RULE double m3idx__e8m0_double(uint32_t e) {
  return m3idx__bits_to_double((uint64_t)(e + 896u) << 52);
}

/* ---- section 4: the exact score, rounded once -------------------------- */

/* RN32(scale * d) for a d that is exactly the score's D (finite, +-inf or
 * NaN), with SPEC's special cases: NaN stays NaN, 0 * inf is NaN, a zero
 * logit is +0.  The product is taken as p + err exactly (fma), p is turned
 * into the round-to-odd value of scale * d, and the fp64 -> fp32 conversion
 * of that rounds correctly (fp64 has more than 24 + 2 bits): one rounding. */
M3IDX_RULE float m3idx__round_scaled(double d, float scale) {
  const double s = (double)scale;
  double p = s * d;
  if (p != p)
    return m3idx__bits_to_float(M3IDX_NAN_BITS);
  if (p - p != 0.0) /* +-inf: d was infinite */
    return (float)p;
  const double err = fma(s, d, -p); /* exact: |p| >= 2^-410, far from fp64 underflow */
  uint64_t b = m3idx__double_to_bits(p);
  if (err != 0.0 && (b & 1u) == 0u)
    b += (err > 0.0) == (p > 0.0) ? 1 : (uint64_t)-1; /* the odd neighbour, towards err */
  const float r = (float)m3idx__bits_to_double(b);
  return r == 0.0f ? 0.0f : r;
}

/* A query element as sign * m * 2^e with m odd (or 0): the form the exact
 * sum adds.  bf16 and e4m3 values give m < 2^8 and e >= -133. */
struct m3idx__odd_form {
  uint32_t m;
  int32_t e;
  int neg;
};

/* Leading zero bits of x != 0. */
M3IDX_RULE int m3idx__clz32(uint32_t x) {
#if defined(__CUDA_ARCH__)
  return __clz((int)x);
#else
  return __builtin_clz(x);
#endif
}

/* Trailing zero bits of x != 0. */
M3IDX_RULE int m3idx__ctz32(uint32_t x) {
#if defined(__CUDA_ARCH__)
  return __ffs((int)x) - 1;
#else
  return __builtin_ctz(x);
#endif
}

/* Trailing zero bits of x != 0. */
M3IDX_RULE int m3idx__ctz64(uint64_t x) {
#if defined(__CUDA_ARCH__)
  return __ffsll((long long)x) - 1;
#else
  return __builtin_ctzll(x);
#endif
}

M3IDX_RULE struct m3idx__odd_form m3idx__odd_form_of(float x) {
  const uint32_t u = m3idx__float_to_bits(x);
  const uint32_t ex = (u >> 23) & 255u;
  struct m3idx__odd_form f = {u & 0x7fffffu, ex ? (int32_t)ex - 150 : -149, (int)(u >> 31)};
  if (ex)
    f.m |= 0x800000u;
  if (f.m != 0u) {
    const int tz = m3idx__ctz32(f.m);
    f.m >>= tz;
    f.e += tz;
  }
  return f;
}

/* For a nonzero finite q: *hi = floor(log2|q|), *lo = its lowest set
 * bit's exponent. */
M3IDX_RULE void m3idx__exponents(float q, int32_t *hi, int32_t *lo) {
  const struct m3idx__odd_form f = m3idx__odd_form_of(q);
  *hi = f.e + (31 - m3idx__clz32(f.m));
  *lo = f.e;
}

/* Fast paths may sum a key's 128 products in fp64 when that cannot round:
 * every product of the row and key is a multiple of 2^(Lq + emin - 128)
 * and the sum stays below 2^(Hq + emax - 116), so the sum is exact when
 * (Hq - Lq) + (emax - emin) <= 41, where Hq and Lq are the row's highest
 * and lowest exponents (above) and emin, emax the key's scale bytes'. */
#define M3IDX_FP64_EXACT_SPAN 41

/* The most key-scale spread (emax - emin) a row allows for fp64 sums: hi
 * and lo its highest and lowest exponents (hi < lo: no nonzero element),
 * special: a NaN or infinite element; -1 when its keys must take the exact
 * path. */
M3IDX_RULE int32_t m3idx__spread_allowed(int32_t hi, int32_t lo, int special) {
  if (special)
    return -1;
  if (hi < lo)
    return M3IDX_FP64_EXACT_SPAN;
  return hi - lo <= M3IDX_FP64_EXACT_SPAN ? M3IDX_FP64_EXACT_SPAN - (hi - lo) : -1;
}

/* The same for a row of 128 decoded elements. */
M3IDX_RULE int32_t m3idx__row_spread_allowed(const float *q) {
  int32_t hi = -100000, lo = 100000;
  int special = 0;
  for (int d = 0; d < M3IDX_HEAD_DIM; d++) {
    const uint32_t u = m3idx__float_to_bits(q[d]) & 0x7fffffffu;
    special |= u >= 0x7f800000u;
    if (u == 0u || u >= 0x7f800000u)
      continue;
    int32_t h, l;
    m3idx__exponents(q[d], &h, &l);
    hi = h > hi ? h : hi;
    lo = l < lo ? l : lo;
  }
  return m3idx__spread_allowed(hi, lo, special);
}

/* The bytes of w (a key's four scale bytes) that are 255, a NaN scale,
 * as 0xff, the others as 0: a byte b is nonzero exactly when
 * ((b & 0x7f) + 0x7f) | b has its top bit set (no carry leaves a byte). */
M3IDX_RULE uint32_t m3idx__nan_scale_bytes(uint32_t w) {
  const uint32_t t = ~w;
  const uint32_t nonzero = (((t & 0x7f7f7f7fu) + 0x7f7f7f7fu) | t) & 0x80808080u;
  return ((nonzero ^ 0x80808080u) >> 7) * 255u;
}

/* emax - emin of a key's four scale bytes; 255 (a NaN scale) gives 255. */
M3IDX_RULE int32_t m3idx__key_spread(const uint8_t *scales) {
  uint32_t lo = scales[0], hi = scales[0];
  for (int g = 1; g < 4; g++) {
    lo = scales[g] < lo ? scales[g] : lo;
    hi = scales[g] > hi ? scales[g] : hi;
  }
  return hi == 255u ? 255 : (int32_t)(hi - lo);
}

/* The exact sum D = sum q[d] * k[d] of SPEC section 4: a fixed-point
 * number in units of 2^-261, two's complement in 9 little-endian 64-bit
 * words (every finite product is such a multiple and below 2^258, so any
 * sum of 128 fits), and the special values seen. */
#define M3IDX_EXACT_WORDS 9
#define M3IDX_EXACT_LSB (-261)
struct m3idx__exact_sum {
  uint64_t w[M3IDX_EXACT_WORDS];
  int nan, pos_inf, neg_inf;
};

/* w += (neg ? -1 : 1) * m * 2^off, m < 2^53, m * 2^off < 2^519.  Every word
 * is visited with a constant index (the term's two words are selected, the
 * carry or borrow ripples through the rest), so a GPU keeps the sum in
 * registers instead of scratch memory. */
M3IDX_RULE void m3idx__exact_add(uint64_t *w, uint64_t m, int32_t off, int neg) {
  const int i = off >> 6, s = off & 63;
  const uint64_t lo = m << s, hi = s ? m >> (64 - s) : 0u;
  uint64_t c = 0u;
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#pragma unroll
#endif
  for (int k = 0; k < M3IDX_EXACT_WORDS; k++) {
    const uint64_t t = k == i ? lo : k == i + 1 ? hi : 0u;
    const uint64_t a = w[k];
    if (!neg) {
      const uint64_t v = a + t;
      const uint64_t v2 = v + c;
      c = (uint64_t)(v < a) + (uint64_t)(v2 < v);
      w[k] = v2;
    } else {
      const uint64_t v = a - t;
      const uint64_t v2 = v - c;
      c = (uint64_t)(a < t) + (uint64_t)(v < c);
      w[k] = v2;
    }
  }
}

/* x = 0, no special value seen. */
M3IDX_RULE void m3idx__exact_clear(struct m3idx__exact_sum *x) {
  for (int i = 0; i < M3IDX_EXACT_WORDS; i++)
    x->w[i] = 0u;
  x->nan = x->pos_inf = x->neg_inf = 0;
}

/* D for one key: q the row's 128 decoded elements (bf16 or e4m3 values),
 * data the key's 64 element bytes, scales its 4 scale bytes. */
M3IDX_RULE void m3idx__exact_dot(const float *q, const uint8_t *data, const uint8_t *scales,
                                 struct m3idx__exact_sum *out) {
  m3idx__exact_clear(out);
  for (int d = 0; d < M3IDX_HEAD_DIM; d++) {
    const uint32_t code = m3idx__code_at(data, d);
    const uint32_t e = scales[d / 32];
    const int32_t k = m3idx__e2m1_halves(code); /* k[d] = k * 2^(e - 128) */
    const uint32_t qu = m3idx__float_to_bits(q[d]);
    if ((qu & 0x7fffffffu) > 0x7f800000u || e == 255u) {
      out->nan = 1;
    } else if ((qu & 0x7fffffffu) == 0x7f800000u) { /* inf * k */
      if (k == 0)
        out->nan = 1;
      else if ((k < 0) != (qu >> 31 != 0u))
        out->neg_inf = 1;
      else
        out->pos_inf = 1;
    } else if (k != 0 && (qu & 0x7fffffffu) != 0u) {
      const struct m3idx__odd_form f = m3idx__odd_form_of(q[d]);
      const uint32_t mag = (uint32_t)(k < 0 ? -k : k);
      m3idx__exact_add(out->w, f.m * mag, f.e + (int32_t)e - 128 - M3IDX_EXACT_LSB,
                       f.neg != (k < 0));
    }
  }
}

/* RN32(scale * D) for an exact sum, with the special cases of
 * m3idx__round_scaled.  The magnitude times scale's significand is formed
 * exactly in 32-bit limbs, then rounded to nearest even at fp32's
 * precision (subnormal results kept, beyond fp32's range +-inf). */
M3IDX_RULE float m3idx__round_exact(const struct m3idx__exact_sum *x, float scale) {
  if (x->nan || (x->pos_inf && x->neg_inf))
    return m3idx__bits_to_float(M3IDX_NAN_BITS);
  if (x->pos_inf || x->neg_inf)
    return m3idx__round_scaled(x->pos_inf ? (double)INFINITY : -(double)INFINITY, scale);
  const int neg = (x->w[M3IDX_EXACT_WORDS - 1] >> 63) != 0u;
  uint32_t limb[2 * M3IDX_EXACT_WORDS + 1];
  uint64_t borrow = 1u;
  for (int i = 0; i < M3IDX_EXACT_WORDS; i++) { /* |D| as 32-bit limbs */
    uint64_t v = x->w[i];
    if (neg) {
      v = ~v + borrow;
      borrow = borrow && v == 0u;
    }
    limb[2 * i] = (uint32_t)v;
    limb[2 * i + 1] = (uint32_t)(v >> 32);
  }
  const struct m3idx__odd_form s = m3idx__odd_form_of(scale);
  uint64_t carry = 0u;
  for (int i = 0; i < 2 * M3IDX_EXACT_WORDS; i++) { /* times scale's odd significand */
    const uint64_t v = (uint64_t)limb[i] * s.m + carry;
    limb[i] = (uint32_t)v;
    carry = v >> 32;
  }
  limb[2 * M3IDX_EXACT_WORDS] = (uint32_t)carry;
  /* Every limb is read with a constant index (as in m3idx__exact_add). */
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define M3IDX__UNROLL _Pragma("unroll")
#else
#define M3IDX__UNROLL
#endif
  int top = -1; /* the highest set bit of the product */
  M3IDX__UNROLL
  for (int i = 0; i <= 2 * M3IDX_EXACT_WORDS; i++)
    if (limb[i] != 0u)
      top = 32 * i + 31 - m3idx__clz32(limb[i]);
  if (top < 0)
    return 0.0f; /* a zero logit is +0 */
  /* Bit j of the product weighs 2^(j + lsb); keep bits down to the larger
     of top - 23 (24 bits) and fp32's least subnormal, 2^-149. */
  const int32_t lsb = s.e + M3IDX_EXACT_LSB;
  const int32_t low = top - 23 > -149 - lsb ? top - 23 : -149 - lsb;
  /* Bits low - 1 .. top (the half bit, then at most 24) into window, and
     whether any bit below low - 1 is set. */
  const int32_t base = low - 1;
  uint64_t window = 0u;
  uint32_t sticky = 0u;
  M3IDX__UNROLL
  for (int i = 0; i <= 2 * M3IDX_EXACT_WORDS; i++) {
    const int32_t sh = 32 * i - base; /* where limb i's bit 0 lands in window */
    const uint64_t v = limb[i];
    if (sh >= 0 && sh < 64)
      window |= v << sh;
    else if (sh < 0 && sh > -32)
      window |= v >> -sh;
    if (sh <= -32)
      sticky |= limb[i];
    else if (sh < 0)
      sticky |= limb[i] & ((1u << -sh) - 1u);
  }
#undef M3IDX__UNROLL
  uint32_t mant = (uint32_t)(window >> 1) & 0x1ffffffu;
  const uint32_t half = (uint32_t)window & 1u;
  if (half && (sticky || (mant & 1u)))
    mant++;
  int32_t ex = low + lsb; /* the weight of mant's last bit */
  if (mant >> 24) {
    mant >>= 1;
    ex++;
  }
  const uint32_t sign = (uint32_t)(neg != s.neg) << 31;
  if (mant == 0u)
    return 0.0f;
  if (mant < 0x800000u) /* subnormal: ex is -149 */
    return m3idx__bits_to_float(sign | mant);
  const int32_t biased = ex + 23 + 127;
  if (biased >= 255)
    return m3idx__bits_to_float(sign | 0x7f800000u);
  return m3idx__bits_to_float(sign | ((uint32_t)biased << 23) | (mant & 0x7fffffu));
}

/* The exact logit of one key (m3idx__exact_dot, then m3idx__round_exact):
 * the path every key can take. */
M3IDX_RULE float m3idx__exact_logit(const float *q, const uint8_t *data, const uint8_t *scales,
                                    float scale) {
  struct m3idx__exact_sum x;
  m3idx__exact_dot(q, data, scales, &x);
  return m3idx__round_exact(&x, scale);
}

/* x += t exactly, for a finite fp64 t that is a multiple of 2^-261 below
 * 2^258 in magnitude (any product of q and k, or a sum of such within one
 * scale group). */
M3IDX_RULE void m3idx__exact_add_double(struct m3idx__exact_sum *x, double t) {
  if (t == 0.0)
    return;
  const uint64_t u = m3idx__double_to_bits(t);
  const int32_t be = (int32_t)((u >> 52) & 2047u);
  uint64_t m = (u & 0xfffffffffffffull) | (be ? 0x10000000000000ull : 0u);
  const int tz = m3idx__ctz64(m); /* t = m * 2^e, m odd: e >= -261 */
  m3idx__exact_add(x->w, m >> tz, (be ? be : 1) - 1075 + tz - M3IDX_EXACT_LSB, (int)(u >> 63));
}

/* The logit RN32(scale * (t[0] + t[1] + t[2] + t[3])) of four exact,
 * finite fp64 terms (multiples of 2^-261 below 2^258), rounded once.
 * Usually decided from fp64: the sum S of the terms and y = fl(scale * S)
 * are within 4.01 u * |scale| * sum|t| of the truth (u = 2^-53: Higham's
 * gamma_3 for S, one rounding for y); delta = 2^-50 |scale| fl(sum|t|) is
 * at least twice that, with room for computing y - delta and y + delta,
 * so the truth lies in [y - delta, y + delta] (every value here is a
 * normal fp64: |scale * t| >= 2^-410).  RN32 is monotone: when both ends
 * round to the same fp32, so does the truth.  Otherwise (a rounding
 * boundary within 2^-49 of the value) the terms are added exactly. */
M3IDX_RULE float m3idx__logit_of_terms(const double t[4], float scale) {
  const double s = (double)scale;
  const double sum = ((t[0] + t[1]) + t[2]) + t[3];
  const double mag = ((fabs(t[0]) + fabs(t[1])) + fabs(t[2])) + fabs(t[3]);
  const double y = s * sum;
  const double delta = fabs(s) * mag * 0x1p-50;
  const float lo = (float)(y - delta), hi = (float)(y + delta);
  if (lo == hi)
    return lo == 0.0f ? 0.0f : lo; /* a zero logit is +0 */
  struct m3idx__exact_sum x;
  m3idx__exact_clear(&x);
  for (int g = 0; g < 4; g++)
    m3idx__exact_add_double(&x, t[g]);
  return m3idx__round_exact(&x, scale);
}

/* The exact logit of a key whose row allows fp64 sums over keys of one
 * scale (m3idx__row_spread_allowed >= 0: no NaN or infinite element, span
 * <= 41) but not over this key's scale spread.  Each group's 32 products
 * share a scale, so each group's sum of q[d] * k[d] is exact in fp64 (the
 * rule of M3IDX_FP64_EXACT_SPAN with emax = emin); the four sums are the
 * terms of m3idx__logit_of_terms.  A NaN scale byte gives NaN. */
M3IDX_RULE float m3idx__exact_logit_grouped(const float *q, const uint8_t *data,
                                            const uint8_t *scales, float scale) {
  double t[4];
  for (int g = 0; g < 4; g++) {
    if (scales[g] == 255u)
      return m3idx__bits_to_float(M3IDX_NAN_BITS);
    const double k = m3idx__e8m0_double(scales[g]) * 0.5; /* a half, at the group's scale */
    double sum = 0.0;
    for (int d = 32 * g; d < 32 * g + 32; d++)
      sum += (double)q[d] * ((double)m3idx__e2m1_halves(m3idx__code_at(data, d)) * k);
    t[g] = sum;
  }
  return m3idx__logit_of_terms(t, scale);
}

/* The exact logit of a key past its row's fp64 spread: by group sums where
 * the row allows them (row_spread >= 0), else element by element. */
M3IDX_RULE float m3idx__exact_logit_of_row(const float *q, int32_t row_spread,
                                           const uint8_t *data, const uint8_t *scales,
                                           float scale) {
  return row_spread >= 0 ? m3idx__exact_logit_grouped(q, data, scales, scale)
                         : m3idx__exact_logit(q, data, scales, scale);
}

/* A block's best key so far, as section 4 allows a backend to keep it:
 * the exact D of the keys summed in fp64 (the largest for scale >= 0,
 * else the smallest: RN is monotone, so the block's largest logit is that
 * D rounded once), and the largest logit of the keys rounded one by one. */
struct m3idx__block_best {
  double d;
  float logit;
  int have_d, have_logit;
};

M3IDX_RULE void m3idx__best_start(struct m3idx__block_best *b) {
  b->d = 0.0;
  b->logit = 0.0f;
  b->have_d = b->have_logit = 0;
}

M3IDX_RULE void m3idx__best_take_d(struct m3idx__block_best *b, double d, float scale) {
  if (!b->have_d || (scale >= 0.0f ? d > b->d : d < b->d))
    b->d = d;
  b->have_d = 1;
}

/* A logit; NaN is ignored. */
M3IDX_RULE void m3idx__best_take_logit(struct m3idx__block_best *b, float logit) {
  if (logit != logit)
    return;
  if (!b->have_logit || logit > b->logit)
    b->logit = logit;
  b->have_logit = 1;
}

/* b takes what another share of the block's keys kept. */
M3IDX_RULE void m3idx__best_merge(struct m3idx__block_best *b, const struct m3idx__block_best *o,
                                  float scale) {
  if (o->have_d)
    m3idx__best_take_d(b, o->d, scale);
  if (o->have_logit)
    m3idx__best_take_logit(b, o->logit);
}

/* The block's largest logit, unclamped; NaN when every logit was NaN. */
M3IDX_RULE float m3idx__best_logit(const struct m3idx__block_best *b, float scale) {
  float s = b->have_logit ? b->logit : m3idx__bits_to_float(M3IDX_NAN_BITS);
  if (b->have_d) {
    const float l = m3idx__round_scaled(b->d, scale);
    if (!b->have_logit || l > s)
      s = l;
  }
  return s;
}

/* ---- section 5: causality ---------------------------------------------- */

/* Blocks (pages) that hold `tokens' tokens: ceil(tokens / 128), in 64-bit
 * so that a length near 2^31 does not overflow on the way (a request of
 * seq_len tokens reads this many; its last row sees them all). */
M3IDX_RULE int32_t m3idx__blocks_of(int64_t tokens) {
  return (int32_t)((tokens + M3IDX_BLOCK_SIZE - 1) / M3IDX_BLOCK_SIZE);
}

/* Keys of block b that a row at position pos sees: those at b * 128 .. pos,
 * at most 128, and none where the block starts past pos. */
M3IDX_RULE int32_t m3idx__keys_seen(int32_t pos, int32_t b) {
  const int32_t k = pos - b * M3IDX_BLOCK_SIZE + 1;
  return k <= 0 ? 0 : k > M3IDX_BLOCK_SIZE ? M3IDX_BLOCK_SIZE : k;
}

/* ---- section 6: clamp and sentinels ------------------------------------ */

/* On the bits: positive floats order like their bits; NaN (with its
 * payload) and negative values pass unchanged, whatever a compiler makes
 * of float selects. */
M3IDX_RULE float m3idx__clamp(float score) {
  uint32_t u = m3idx__float_to_bits(score);
  if (u > M3IDX_SCORE_CLAMP_BITS && u <= 0x7f800000u)
    u = M3IDX_SCORE_CLAMP_BITS;
  return m3idx__bits_to_float(u);
}

/* Block b's pinned score in a row of n causal blocks: clamped, then init
 * (blocks 0 .. I-1), then local (the last L, written last). */
M3IDX_RULE float m3idx__pinned(float s, int32_t b, int32_t n, int32_t init_blocks,
                               int32_t local_blocks) {
  s = m3idx__clamp(s);
  if (b < init_blocks)
    s = M3IDX_SENTINEL_INIT;
  if (b >= n - local_blocks)
    s = M3IDX_SENTINEL_LOCAL;
  return s;
}

/* ---- section 7: the top-k order ---------------------------------------- */

/* The score half of a rank key: its unsigned order is the scores' order
 * (-0 as +0, NaN below every number, 0). */
M3IDX_RULE uint32_t m3idx__rank_score(float score) {
  uint32_t u = m3idx__float_to_bits(score);
  if (score != score)
    return 0u;
  if (score == 0.0f)
    u = 0u;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* The rank key of block `id' whose score half is `half'. */
M3IDX_RULE uint64_t m3idx__rank_key_join(uint32_t half, int32_t id) {
  return ((uint64_t)half << 32) | (uint32_t)(0xffffffffu - (uint32_t)id);
}

/* A key whose unsigned order is the top-k order: score descending, then
 * block id ascending. */
M3IDX_RULE uint64_t m3idx__rank_key(float score, int32_t id) {
  return m3idx__rank_key_join(m3idx__rank_score(score), id);
}

/* The block id of a rank key. */
M3IDX_RULE int32_t m3idx__rank_key_id(uint64_t key) {
  return (int32_t)(0xffffffffu - (uint32_t)key);
}

#endif /* M3IDX_SPEC_RULES_H */
