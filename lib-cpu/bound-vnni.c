/*
 * bound-vnni.c - a block's bound terms (lib/verify-rules.h) with AVX-512
 * VNNI, the same bits as the rule's scalar form: the row's integers qi
 * split into two byte digits (qi = 256 hi + lo, hi <= 128), a key's 64
 * code bytes looked up to magnitudes in halves, and vpdpbusd summing
 * digit times magnitude in lanes of four bytes (four lanes a group); four
 * keys' lanes are then added group by group, each group's integer scaled
 * by its power of two exactly, and the groups added in order in fp64;
 * A's 2^-s is applied to the block's largest (powers of two commute with
 * the roundings: every value here is a normal double).
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <math.h>
#include <string.h>

#include "cpu.h"

#ifdef M3IDX_CPU_HAVE_AVX512
#include <immintrin.h>

#include "verify-rules.h"

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

/* Per 128-bit lane (a group), four keys' sums of its four 32-bit lanes:
 * lane-128 g of the result is {key 0, 1, 2, 3}'s group g. */
TARGET static inline __m512i sum_groups(__m512i a0, __m512i a1, __m512i a2, __m512i a3) {
  const __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(a0, a1), _mm512_unpackhi_epi32(a0, a1));
  const __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(a2, a3), _mm512_unpackhi_epi32(a2, a3));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
}

/* 2^(e - 128) of four keys' scale bytes, as doubles: groups 0 and 1 of
 * keys 0..3 (p01), groups 2 and 3 (p23). */
TARGET static inline void powers(__m128i scales16, __m512d *p01, __m512d *p23) {
  const __m128i by_group = _mm_shuffle_epi8(
      scales16, _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
  const __m512i bias = _mm512_set1_epi64(1023 - 128);
  *p01 = _mm512_castsi512_pd(
      _mm512_slli_epi64(_mm512_add_epi64(_mm512_cvtepu8_epi64(by_group), bias), 52));
  *p23 = _mm512_castsi512_pd(_mm512_slli_epi64(
      _mm512_add_epi64(_mm512_cvtepu8_epi64(_mm_srli_si128(by_group, 8)), bias), 52));
}

/* ((t0 + t1) + t2) + t3 for four keys, t_g = G_g 2^(e_g - 128): the
 * rule's fp64 sum in group order (each product is exact). */
TARGET static inline __m256d add_groups(__m512i g, __m512d p01, __m512d p23) {
  const __m512d t01 = _mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(g)), p01);
  const __m512d t23 = _mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(g, 1)), p23);
  __m256d acc = _mm256_add_pd(_mm512_castpd512_pd256(t01), _mm512_extractf64x4_pd(t01, 1));
  acc = _mm256_add_pd(acc, _mm512_castpd512_pd256(t23));
  return _mm256_add_pd(acc, _mm512_extractf64x4_pd(t23, 1));
}

TARGET void m3idx__cpu_block_terms_vnni(const uint32_t *qi, int32_t s, const uint8_t *codes,
                                        const uint8_t *scales, int32_t keys, double *out) {
  /* Byte j of each digit vector: element 2j (even) or 2j + 1 (odd). */
  uint8_t digits[4][64];
  for (int j = 0; j < 64; j++) {
    digits[0][j] = (uint8_t)(qi[2 * j] & 255u);
    digits[1][j] = (uint8_t)(qi[2 * j + 1] & 255u);
    digits[2][j] = (uint8_t)(qi[2 * j] >> 8);
    digits[3][j] = (uint8_t)(qi[2 * j + 1] >> 8);
  }
  const __m512i lo_even = _mm512_loadu_si512(digits[0]), lo_odd = _mm512_loadu_si512(digits[1]);
  const __m512i hi_even = _mm512_loadu_si512(digits[2]), hi_odd = _mm512_loadu_si512(digits[3]);
  const __m512i table = _mm512_broadcast_i32x4(
      _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, 1, 2, 3, 4, 6, 8, 12));
  const __m512i nib = _mm512_set1_epi8(15), ones = _mm512_set1_epi8(1);
  __m256d a_max = _mm256_setzero_pd(), k_max = _mm256_setzero_pd();
  const __m256d none = _mm256_set1_pd(-1.0);
  for (int32_t t0 = 0; t0 < keys; t0 += 4) {
    __m512i acc_a[4], acc_k[4];
    for (int k = 0; k < 4; k++) {
      const int32_t t = t0 + k < keys ? t0 + k : t0; /* past the keys: a repeat, masked */
      const __m512i code = _mm512_loadu_si512(codes + 64 * t);
      const __m512i even = _mm512_shuffle_epi8(table, _mm512_and_si512(code, nib));
      const __m512i odd =
          _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(code, 4), nib));
      __m512i lo = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo_even, even);
      lo = _mm512_dpbusd_epi32(lo, lo_odd, odd);
      __m512i hi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi_even, even);
      hi = _mm512_dpbusd_epi32(hi, hi_odd, odd);
      acc_a[k] = _mm512_add_epi32(lo, _mm512_slli_epi32(hi, 8));
      acc_k[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, _mm512_add_epi8(even, odd));
    }
    /* Four keys' scale bytes; past the keys (a block's last four, or one
       key alone) only the bytes that exist are read. */
    __m128i sc;
    if (t0 + 4 <= keys)
      sc = _mm_loadu_si128((const __m128i *)(scales + 4 * t0));
    else {
      uint8_t part[16] = {0};
      memcpy(part, scales + 4 * t0, (size_t)(4 * (keys - t0)));
      sc = _mm_loadu_si128((const __m128i *)part);
    }
    __m512d p01, p23;
    powers(sc, &p01, &p23);
    /* A without its 2^-s, which commutes with the sums' roundings and the
       largest: it is applied once at the end. */
    const __m256d a = add_groups(sum_groups(acc_a[0], acc_a[1], acc_a[2], acc_a[3]), p01, p23);
    const __m256d kk = add_groups(sum_groups(acc_k[0], acc_k[1], acc_k[2], acc_k[3]), p01, p23);
    /* Keys past the block's and keys with a NaN scale take no part. */
    const uint32_t nan_bytes = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(sc, _mm_set1_epi8(-1)));
    __mmask8 skip = 0;
    for (int k = 0; k < 4; k++)
      if (t0 + k >= keys || ((nan_bytes >> (4 * k)) & 15u))
        skip |= (__mmask8)(1u << k);
    a_max = _mm256_max_pd(a_max, _mm256_mask_blend_pd(skip, a, none));
    k_max = _mm256_max_pd(k_max, _mm256_mask_blend_pd(skip, kk, none));
  }
  double av[4], kv[4];
  _mm256_storeu_pd(av, a_max);
  _mm256_storeu_pd(kv, k_max);
  out[0] = out[1] = 0.0;
  for (int k = 0; k < 4; k++) {
    out[0] = av[k] > out[0] ? av[k] : out[0];
    out[1] = kv[k] > out[1] ? kv[k] : out[1];
  }
  out[0] *= m3idx__verify_pow2(-s); /* exact */
}
#endif

#ifdef M3IDX_CPU_HAVE_AVX512
/* m3idx__verify_floor_key over 16 keys a vector: each key's largest scale
 * byte plus one (0 for a key with a NaN scale or past the keys), the
 * first of the largest. */
TARGET int32_t m3idx__cpu_floor_key_vnni(const uint8_t *scales, int32_t keys) {
  int32_t best = -1;
  uint32_t best_v = 0;
  for (int32_t t0 = 0; t0 < keys; t0 += 16) {
    const __mmask16 live = (__mmask16)(keys - t0 >= 16 ? 0xffffu : (1u << (keys - t0)) - 1u);
    const __m512i v = _mm512_maskz_loadu_epi32(live, scales + 4 * t0);
    __m512i m = _mm512_max_epu8(v, _mm512_srli_epi32(v, 8));
    m = _mm512_and_si512(_mm512_max_epu8(m, _mm512_srli_epi32(m, 16)), _mm512_set1_epi32(255));
    const __mmask16 nan = _mm512_test_epi32_mask(
        _mm512_movm_epi8(_mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(-1))), _mm512_set1_epi32(-1));
    const __m512i val = _mm512_maskz_add_epi32(live & (__mmask16)~nan, m, _mm512_set1_epi32(1));
    const uint32_t top = (uint32_t)_mm512_reduce_max_epu32(val);
    if (top > best_v) {
      best_v = top;
      best = t0 + __builtin_ctz((unsigned)_mm512_cmpeq_epi32_mask(val, _mm512_set1_epi32((int)top)));
    }
  }
  return best;
}
#endif
