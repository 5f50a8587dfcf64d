/*
 * vendor-gfx950.h - gfx950's room in the scoring kernels: its path macro
 * and the two instructions of its fast path, v_cvt_scalef32_pk_f32_fp4
 * (e2m1 codes to fp32) and v_permlane16_swap (the last step of a fold
 * across a warp's two rows of 16 lanes).  score-parts.h includes it and
 * calls it where GFX950_OPS(P) holds.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_GPU_VENDOR_GFX950_H
#define M3IDX_GPU_VENDOR_GFX950_H

#include "device-math.h"

#if defined(__gfx950__)

#define GFX950_OPS(P) ((P) != M3IDX_GPU_PATH_PLAIN)

/* f of v and v's value in the partner lane of the other 16-lane row:
 * v_permlane16_swap of v with itself leaves each lane its own value and
 * its partner's. */
template <class T, class F> M3IDX_DEV T gfx950_fold_rows(T v, F f) {
  const uint32_t u = __builtin_bit_cast(uint32_t, v);
  const auto s = __builtin_amdgcn_permlane16_swap(u, u, false, false);
  return f(__builtin_bit_cast(T, (uint32_t)s[0]), __builtin_bit_cast(T, (uint32_t)s[1]));
}

/* The values of the 8 codes of word w, two a byte from
 * v_cvt_scalef32_pk_f32_fp4 with scale 1 (exact: every e2m1 value is an
 * fp32), its low nibble first. */
M3IDX_DEV void gfx950_code_values(uint32_t w, float v[8]) {
  const auto b0 = __builtin_amdgcn_cvt_scalef32_pk_f32_fp4(w, 1.0f, 0);
  const auto b1 = __builtin_amdgcn_cvt_scalef32_pk_f32_fp4(w, 1.0f, 1);
  const auto b2 = __builtin_amdgcn_cvt_scalef32_pk_f32_fp4(w, 1.0f, 2);
  const auto b3 = __builtin_amdgcn_cvt_scalef32_pk_f32_fp4(w, 1.0f, 3);
  v[0] = b0[0], v[1] = b0[1], v[2] = b1[0], v[3] = b1[1];
  v[4] = b2[0], v[5] = b2[1], v[6] = b3[0], v[7] = b3[1];
}

#else
#define GFX950_OPS(P) false
#endif /* __gfx950__ */

#endif /* M3IDX_GPU_VENDOR_GFX950_H */
