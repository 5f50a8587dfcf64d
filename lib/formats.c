/*
 * formats.c - public conversions between fp32 and bf16, e4m3, e2m1, e8m0.
 *
 * Each runs in round-to-nearest with subnormals kept, whatever the
 * caller's floating-point environment (a -ffast-math program sets FTZ
 * and DAZ; fesetround may have changed the mode).
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include "encoding.h"
#include "fp-env.h"
#include "m3idx.h"

/* result = expr, computed in the reference environment. */
#define GUARDED(type, expr)                      \
  do {                                           \
    m3idx_fpenv env_ = m3idx__fpenv_enter();     \
    type r_ = (expr);                            \
    m3idx__fpenv_leave(env_);                    \
    return r_;                                   \
  } while (0)

float m3idx_bf16_to_float(uint16_t x) { GUARDED(float, m3idx__bf16_value(x)); }
uint16_t m3idx_float_to_bf16(float x) { GUARDED(uint16_t, m3idx__encode_bf16(x)); }
float m3idx_e4m3_to_float(uint8_t x) { GUARDED(float, m3idx__e4m3_value(x)); }
uint8_t m3idx_float_to_e4m3(float x) { GUARDED(uint8_t, m3idx__encode_e4m3(x)); }
float m3idx_e2m1_to_float(uint8_t code) { GUARDED(float, m3idx__e2m1_value(code)); }
uint8_t m3idx_float_to_e2m1(float x) { GUARDED(uint8_t, m3idx__encode_e2m1(x)); }
float m3idx_e8m0_to_float(uint8_t e) { GUARDED(float, m3idx__e8m0_value(e)); }
uint8_t m3idx_e8m0_for_amax(float amax) { GUARDED(uint8_t, m3idx__encode_e8m0(amax)); }
