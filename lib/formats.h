/*
 * formats.h - exact decoding of the element formats (SPEC section 2).
 *
 * Shared by the front-end's public helpers and the CPU reference.  Every
 * decode here is exact: bf16, e4m3, e2m1 and e8m0 values are fp32 values.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_FORMATS_H
#define M3IDX_FORMATS_H

#include <stdint.h>
#include <string.h>

static inline float m3idx__bits_to_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline uint32_t m3idx__float_to_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float m3idx__bf16_value(uint16_t x) {
  return m3idx__bits_to_float((uint32_t)x << 16);
}

/* OCP E4M3 "fn": bias 7, subnormals, S.1111.111 is NaN, no infinities. */
static inline float m3idx__e4m3_value(uint8_t x) {
  uint32_t sign = (uint32_t)(x >> 7) << 31;
  uint32_t e = (x >> 3) & 15u, m = x & 7u;
  if (e == 15u && m == 7u)
    return m3idx__bits_to_float(sign | 0x7fc00000u);
  if (e == 0u) {
    /* m * 2^-9: exact, and an fp32 normal. */
    float v = (float)m * 0x1p-9f;
    return sign ? -v : v;
  }
  return m3idx__bits_to_float(sign | ((e + 120u) << 23) | (m << 20));
}

/* fp32 bits of e2m1 codes 0..15: +{0,.5,1,1.5,2,3,4,6}, then negatives. */
#define M3IDX__E2M1_BITS_INIT                                              \
  {0x00000000u, 0x3f000000u, 0x3f800000u, 0x3fc00000u, 0x40000000u,       \
   0x40400000u, 0x40800000u, 0x40c00000u, 0x80000000u, 0xbf000000u,       \
   0xbf800000u, 0xbfc00000u, 0xc0000000u, 0xc0400000u, 0xc0800000u,       \
   0xc0c00000u}

static inline float m3idx__e2m1_value(uint8_t code) {
  static const uint32_t bits[16] = M3IDX__E2M1_BITS_INIT;
  return m3idx__bits_to_float(bits[code & 15u]);
}

/* 2^(e-127); e = 0 is the fp32 subnormal 2^-127; e = 255 is NaN. */
static inline float m3idx__e8m0_value(uint8_t e) {
  if (e == 255u)
    return m3idx__bits_to_float(0x7fc00000u);
  if (e == 0u)
    return m3idx__bits_to_float(0x00400000u);
  return m3idx__bits_to_float((uint32_t)e << 23);
}

#endif /* M3IDX_FORMATS_H */
