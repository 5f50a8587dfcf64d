/*
 * formats.c - public conversions between fp32 and bf16, e4m3, e2m1, e8m0.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <math.h>

#include "spec-rules.h"
#include "m3idx.h"

float m3idx_bf16_to_float(uint16_t x) { return m3idx__bf16_value(x); }

uint16_t m3idx_float_to_bf16(float x) {
  uint32_t u = m3idx__float_to_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep sign, stay quiet */
    return (uint16_t)((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

float m3idx_e4m3_to_float(uint8_t x) { return m3idx__e4m3_value(x); }

uint8_t m3idx_float_to_e4m3(float x) {
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

float m3idx_e2m1_to_float(uint8_t code) { return m3idx__e2m1_value(code); }

uint8_t m3idx_float_to_e2m1(float x) {
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

float m3idx_e8m0_to_float(uint8_t e) { return m3idx__e8m0_value(e); }

/* 6 * 2^(e-127) as fp32; exact, or +inf past FLT_MAX (which no finite
 * amax exceeds, so the comparison below stays exact). */
static float bound(int e) { return 6.0f * m3idx__e8m0_value((uint8_t)e); }

uint8_t m3idx_e8m0_for_amax(float amax) {
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
  while (e < 254 && amax > bound(e))
    e++;
  while (e > 0 && amax <= bound(e - 1))
    e--;
  return (uint8_t)e;
}
