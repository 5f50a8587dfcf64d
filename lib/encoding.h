/*
 * encoding.h - SPEC section 3's encoder: fp32 to bf16, e4m3, e2m1 and the
 * e8m0 scale of a group, each rounded to nearest even.
 *
 * The arithmetic assumes round-to-nearest with subnormals kept: the public
 * helpers (formats.c, pages.c) enter that environment (fp-env.h) around
 * these, whatever mode the caller runs in.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_ENCODING_H
#define M3IDX_ENCODING_H

#include <math.h>

#include "spec-rules.h"

static inline uint16_t m3idx__encode_bf16(float x) {
  uint32_t u = m3idx__float_to_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep sign, stay quiet */
    return (uint16_t)((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static inline uint8_t m3idx__encode_e4m3(float x) {
  uint8_t sign = signbit(x) ? 0x80u : 0x00u;
  float a = fabsf(x);
  if (isnan(x))
    return (uint8_t)(sign | 0x7fu);
  if (a >= 448.0f) /* saturate: +-inf and every larger value become +-448 */
    return (uint8_t)(sign | 0x7eu);
  if (a < 0x1p-6f) {
    /* Subnormal range: a multiple of 2^-9, nearest-even. */
    float q = nearbyintf(a * 0x1p9f);
    return (uint8_t)(sign | (uint8_t)q); /* q == 8 is the smallest normal */
  }
  int e2;
  float f = frexpf(a, &e2);      /* a = f * 2^e2, f in [0.5, 1) */
  float q = nearbyintf((f * 2.0f - 1.0f) * 8.0f); /* mantissa, 0..8 */
  int e = e2 - 1 + 7;
  if (q == 8.0f) {
    q = 0.0f;
    e += 1;
  }
  if (e > 15 || (e == 15 && q > 6.0f))
    return (uint8_t)(sign | 0x7eu);
  return (uint8_t)(sign | (uint8_t)(e << 3) | (uint8_t)q);
}

static inline uint8_t m3idx__encode_e2m1(float x) {
  uint8_t sign = signbit(x) ? 8u : 0u;
  float a = fabsf(x);
  uint8_t m;
  if (isnan(x))
    return 0u;
  /* Midpoints between neighbours; a tie goes to the even code. */
  if (a <= 0.25f)
    m = 0;
  else if (a < 0.75f)
    m = 1;
  else if (a <= 1.25f)
    m = 2;
  else if (a < 1.75f)
    m = 3;
  else if (a <= 2.5f)
    m = 4;
  else if (a < 3.5f)
    m = 5;
  else if (a <= 5.0f)
    m = 6;
  else
    m = 7;
  return (uint8_t)(sign | m);
}

/* 6 * 2^(e-127) as fp32; exact, or +inf past FLT_MAX (which no finite
 * amax exceeds, so the comparison below stays exact). */
static inline float m3idx__e8m0_bound(int e) { return 6.0f * m3idx__e8m0_value((uint8_t)e); }

static inline uint8_t m3idx__encode_e8m0(float amax) {
  amax = fabsf(amax);
  if (!isfinite(amax))
    return 255u;
  if (amax == 0.0f)
    return 0u;
  int e2;
  (void)frexpf(amax, &e2);
  int e = e2 + 123;
  if (e < 0)
    e = 0;
  if (e > 254)
    e = 254;
  while (e < 254 && amax > m3idx__e8m0_bound(e))
    e++;
  while (e > 0 && amax <= m3idx__e8m0_bound(e - 1))
    e--;
  return (uint8_t)e;
}

#endif /* M3IDX_ENCODING_H */
