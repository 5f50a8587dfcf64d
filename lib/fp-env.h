/*
 * fp-env.h - the floating-point environment of the reference arithmetic.
 *
 * A caller may run with flush-to-zero, denormals-are-zero, another
 * rounding mode or unmasked exceptions (a -ffast-math program does).  Each
 * worker thread saves its state, computes with round-to-nearest-even,
 * subnormals honoured and exceptions masked, and restores it.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_FP_ENV_H
#define M3IDX_FP_ENV_H

#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
typedef unsigned int m3idx_fpenv;

static inline m3idx_fpenv m3idx__fpenv_enter(void) {
  m3idx_fpenv saved = _mm_getcsr();
  /* Bits: 15 FTZ, 13-14 rounding, 7-12 exception masks, 6 DAZ. */
  _mm_setcsr((saved & ~(0x8000u | 0x6000u | 0x0040u)) | 0x1f80u);
  return saved;
}

static inline void m3idx__fpenv_leave(m3idx_fpenv saved) { _mm_setcsr(saved); }
#else
#include <fenv.h>
typedef fenv_t m3idx_fpenv;

static inline m3idx_fpenv m3idx__fpenv_enter(void) {
  fenv_t saved;
  feholdexcept(&saved);
  fesetround(FE_TONEAREST);
  return saved;
}

static inline void m3idx__fpenv_leave(m3idx_fpenv saved) { fesetenv(&saved); }
#endif

#endif /* M3IDX_FP_ENV_H */
