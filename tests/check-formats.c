/*
 * check-formats.c - the element conversions and the page encoder against
 * hand-computed values (SPEC sections 2 and 3), and in every floating-point
 * environment a caller may run in.
 *
 * SPDX-License-Identifier: MIT
 */
#include <check.h>
#include <fenv.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "m3idx.h"
#include "spec-rules.h"
#include "suite-main.h"

static uint32_t bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

START_TEST(bf16) {
  ck_assert_uint_eq(bits(m3idx_bf16_to_float(0x3f80)), 0x3f800000u);
  ck_assert_uint_eq(bits(m3idx_bf16_to_float(0xc000)), 0xc0000000u);
  ck_assert_uint_eq(bits(m3idx_bf16_to_float(0x0001)), 0x00010000u); /* subnormal */
  ck_assert_uint_eq(m3idx_float_to_bf16(1.0f), 0x3f80);
  ck_assert_uint_eq(m3idx_float_to_bf16(1.0f + 0x1p-8f), 0x3f80);     /* tie, even */
  ck_assert_uint_eq(m3idx_float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82); /* tie, even */
  ck_assert_uint_eq(m3idx_float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  ck_assert_uint_eq(m3idx_float_to_bf16(-INFINITY), 0xff80);
  ck_assert_uint_eq(m3idx_float_to_bf16(3.4028235e38f), 0x7f80); /* FLT_MAX rounds up to inf */
  uint16_t n = m3idx_float_to_bf16(NAN);
  ck_assert(isnan(m3idx_bf16_to_float(n)));
}
END_TEST

START_TEST(e4m3) {
  ck_assert_uint_eq(bits(m3idx_e4m3_to_float(0x00)), 0x00000000u);
  ck_assert_uint_eq(bits(m3idx_e4m3_to_float(0x80)), 0x80000000u);
  ck_assert(m3idx_e4m3_to_float(0x01) == 0x1p-9f);
  ck_assert(m3idx_e4m3_to_float(0x07) == 7 * 0x1p-9f);
  ck_assert(m3idx_e4m3_to_float(0x08) == 0x1p-6f);
  ck_assert(m3idx_e4m3_to_float(0x38) == 1.0f);
  ck_assert(m3idx_e4m3_to_float(0x3c) == 1.5f);
  ck_assert(m3idx_e4m3_to_float(0x7e) == 448.0f);
  ck_assert(m3idx_e4m3_to_float(0xfe) == -448.0f);
  ck_assert(isnan(m3idx_e4m3_to_float(0x7f)));
  ck_assert(isnan(m3idx_e4m3_to_float(0xff)));
  ck_assert(m3idx_e4m3_to_float(0x78) == 256.0f); /* S.1111.000 is a number */
  ck_assert_uint_eq(m3idx_float_to_e4m3(1.0f), 0x38);
  ck_assert_uint_eq(m3idx_float_to_e4m3(448.0f), 0x7e);
  ck_assert_uint_eq(m3idx_float_to_e4m3(500.0f), 0x7e);       /* saturates */
  ck_assert_uint_eq(m3idx_float_to_e4m3(-INFINITY), 0xfe);
  ck_assert_uint_eq(m3idx_float_to_e4m3(0x1p-10f), 0x00);     /* tie, even */
  ck_assert_uint_eq(m3idx_float_to_e4m3(3 * 0x1p-10f), 0x02); /* tie, even */
  ck_assert_uint_eq(m3idx_float_to_e4m3(1.0625f), 0x38);      /* tie, even */
  ck_assert_uint_eq(m3idx_float_to_e4m3(1.1875f), 0x3a);      /* tie, even */
  ck_assert_uint_eq(m3idx_float_to_e4m3(15.5f * 0x1p-10f), 0x08); /* rounds into normals */
  ck_assert_uint_eq(m3idx_float_to_e4m3(NAN) & 0x7f, 0x7f);
  for (int x = 0; x < 256; x++)
    if ((x & 0x7f) != 0x7f)
      ck_assert_uint_eq(m3idx_float_to_e4m3(m3idx_e4m3_to_float((uint8_t)x)), x);
}
END_TEST

START_TEST(e2m1) {
  static const float v[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (int c = 0; c < 8; c++) {
    ck_assert(m3idx_e2m1_to_float((uint8_t)c) == v[c]);
    ck_assert(m3idx_e2m1_to_float((uint8_t)(c | 8)) == -v[c]);
    ck_assert_uint_eq(m3idx_float_to_e2m1(v[c]), c);
  }
  ck_assert_uint_eq(bits(m3idx_e2m1_to_float(8)), 0x80000000u);
  ck_assert_uint_eq(m3idx_float_to_e2m1(0.25f), 0);  /* ties to even */
  ck_assert_uint_eq(m3idx_float_to_e2m1(0.26f), 1);
  ck_assert_uint_eq(m3idx_float_to_e2m1(0.75f), 2);
  ck_assert_uint_eq(m3idx_float_to_e2m1(1.25f), 2);
  ck_assert_uint_eq(m3idx_float_to_e2m1(1.75f), 4);
  ck_assert_uint_eq(m3idx_float_to_e2m1(2.5f), 4);
  ck_assert_uint_eq(m3idx_float_to_e2m1(3.5f), 6);
  ck_assert_uint_eq(m3idx_float_to_e2m1(5.0f), 6);
  ck_assert_uint_eq(m3idx_float_to_e2m1(5.01f), 7);
  ck_assert_uint_eq(m3idx_float_to_e2m1(100.0f), 7);  /* saturates */
  ck_assert_uint_eq(m3idx_float_to_e2m1(-0.75f), 0xa);
  ck_assert_uint_eq(m3idx_float_to_e2m1(-0.1f), 0x8); /* keeps its sign */
}
END_TEST

START_TEST(e8m0) {
  ck_assert(m3idx_e8m0_to_float(127) == 1.0f);
  ck_assert(m3idx_e8m0_to_float(128) == 2.0f);
  ck_assert_uint_eq(bits(m3idx_e8m0_to_float(0)), 0x00400000u); /* 2^-127 */
  ck_assert_uint_eq(bits(m3idx_e8m0_to_float(1)), 0x00800000u); /* 2^-126 */
  ck_assert_uint_eq(bits(m3idx_e8m0_to_float(254)), 0x7f000000u); /* 2^127 */
  ck_assert(isnan(m3idx_e8m0_to_float(255)));
  ck_assert_uint_eq(m3idx_e8m0_for_amax(0.0f), 0);
  ck_assert_uint_eq(m3idx_e8m0_for_amax(6.0f), 127);
  ck_assert_uint_eq(m3idx_e8m0_for_amax(6.0001f), 128);
  ck_assert_uint_eq(m3idx_e8m0_for_amax(12.0f), 128);
  ck_assert_uint_eq(m3idx_e8m0_for_amax(3.0f), 126);
  ck_assert_uint_eq(m3idx_e8m0_for_amax(0x1p-149f), 0);
  ck_assert_uint_eq(m3idx_e8m0_for_amax(6 * 0x1p-127f), 0);
  ck_assert_uint_eq(m3idx_e8m0_for_amax(nextafterf(6 * 0x1p-127f, 1.0f)), 1);
  ck_assert_uint_eq(m3idx_e8m0_for_amax(3.4028235e38f), 253);
  ck_assert_uint_eq(m3idx_e8m0_for_amax(INFINITY), 255);
  ck_assert_uint_eq(m3idx_e8m0_for_amax(NAN), 255);
  /* Exhaustive over exponents: the smallest e with amax / 2^(e-127) <= 6. */
  for (int e = 1; e < 253; e++) {
    float at = 6.0f * ldexpf(1.0f, e - 127);
    ck_assert_uint_eq(m3idx_e8m0_for_amax(at), e);
    ck_assert_uint_eq(m3idx_e8m0_for_amax(nextafterf(at, INFINITY)), e + 1);
  }
}
END_TEST

/* The GPU kernels' test of a key's scale word for NaN bytes (255): every
 * word of bytes from a set with both neighbours of each carry edge. */
START_TEST(nan_scale_bytes) {
  static const uint8_t v[] = {0, 1, 2, 126, 127, 128, 129, 253, 254, 255};
  for (int i = 0; i < 10000; i++) {
    uint8_t b[4];
    uint32_t w = 0, want = 0;
    for (int g = 0; g < 4; g++) {
      b[g] = v[(i / (int)(g == 0 ? 1 : g == 1 ? 10 : g == 2 ? 100 : 1000)) % 10];
      w |= (uint32_t)b[g] << (8 * g);
      want |= (b[g] == 255 ? 0xffu : 0u) << (8 * g);
    }
    ck_assert_uint_eq(m3idx__nan_scale_bytes(w), want);
    ck_assert_int_eq(m3idx__key_spread(b) == 255, want != 0u);
  }
}
END_TEST

START_TEST(page_encode_hand_computed) {
  uint8_t *page = calloc(1, M3IDX_PAGE_BYTES);
  float key[128], back[128];
  for (int d = 0; d < 128; d++)
    key[d] = 0.0f;
  /* group 0: amax 6 -> e 127; 1.5 -> code 3, -4 -> code 0xe, 0.75 -> 1.0 (tie) */
  key[0] = 1.5f;
  key[1] = -4.0f;
  key[2] = 0.75f;
  key[3] = 6.0f;
  /* group 1: amax 12 -> e 128 (x / 2): 12 -> 6 (7), 5 -> 2.5 -> 2 (4) */
  key[32] = 12.0f;
  key[33] = 5.0f;
  /* group 2: all zero -> e 0 */
  /* group 3: a NaN -> e 255, all codes 0 */
  key[96] = NAN;
  key[97] = 1.0f;
  ck_assert_int_eq(m3idx_page_encode_f32(page, 5, key), M3IDX_OK);
  const uint8_t *data = page + 64 * 5, *sc = page + 8192 + 4 * 5;
  ck_assert_uint_eq(data[0], 0xe3);
  ck_assert_uint_eq(data[1], 0x72); /* 0.75 -> code 2 (low), 6 -> code 7 (high) */
  ck_assert_uint_eq(data[16], 0x47);
  ck_assert_uint_eq(data[48], 0x00);
  ck_assert_uint_eq(sc[0], 127);
  ck_assert_uint_eq(sc[1], 128);
  ck_assert_uint_eq(sc[2], 0);
  ck_assert_uint_eq(sc[3], 255);
  for (int i = 0; i < 64 * 5; i++)
    ck_assert_uint_eq(page[i], 0); /* other slots untouched */
  ck_assert_int_eq(m3idx_page_decode(page, 5, back), M3IDX_OK);
  ck_assert(back[0] == 1.5f && back[1] == -4.0f && back[2] == 1.0f && back[3] == 6.0f);
  ck_assert(back[32] == 12.0f && back[33] == 4.0f);
  ck_assert(back[64] == 0.0f);
  ck_assert(isnan(back[96]) && isnan(back[97]));
  free(page);
}
END_TEST

/* Values on the e2m1 grid times 2^k survive encode + decode exactly. */
START_TEST(page_round_trip) {
  uint8_t *page = calloc(1, M3IDX_PAGE_BYTES);
  static const float grid[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  uint64_t s = 42;
  for (int t = 0; t < 128; t++) {
    float key[128], back[128];
    uint16_t kb[128];
    for (int g = 0; g < 4; g++) {
      int k = (int)((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 58) % 60 - 30;
      for (int j = 0; j < 32; j++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        float v = grid[(s >> 40) & 7] * ((s >> 50) & 1 ? -1.0f : 1.0f);
        key[32 * g + j] = ldexpf(j == 0 ? 6.0f : v, k); /* amax is 6 * 2^k */
      }
    }
    for (int d = 0; d < 128; d++)
      kb[d] = m3idx_float_to_bf16(key[d]);
    ck_assert_int_eq((t & 1) ? m3idx_page_encode_bf16(page, t, kb)
                             : m3idx_page_encode_f32(page, t, key), M3IDX_OK);
    ck_assert_int_eq(m3idx_page_decode(page, t, back), M3IDX_OK);
    for (int d = 0; d < 128; d++)
      ck_assert_msg(bits(back[d]) == bits(key[d]) ||
                    (key[d] == 0.0f && back[d] == 0.0f),
                    "slot %d element %d: %a vs %a", t, d, (double)back[d], (double)key[d]);
  }
  free(page);
}
END_TEST

START_TEST(encode_keys) {
  float *keys = malloc(sizeof(float) * 130 * 128);
  for (int i = 0; i < 130 * 128; i++)
    keys[i] = (float)(i % 13) - 6.0f;
  uint8_t *pages = malloc(2 * M3IDX_PAGE_BYTES);
  memset(pages, 0x5a, 2 * M3IDX_PAGE_BYTES);
  ck_assert_int_eq(m3idx_encode_keys_f32(keys, 130, pages, 2), M3IDX_OK);
  uint8_t one[M3IDX_PAGE_BYTES] = {0};
  ck_assert_int_eq(m3idx_page_encode_f32(one, 1, keys + 129 * 128), M3IDX_OK);
  ck_assert_int_eq(memcmp(pages + M3IDX_PAGE_BYTES + 64, one + 64, 64), 0);
  /* Unused slots of the last page are zero. */
  for (int t = 2; t < 128; t++) {
    for (int i = 0; i < 64; i++)
      ck_assert_uint_eq(pages[M3IDX_PAGE_BYTES + 64 * t + i], 0);
    for (int g = 0; g < 4; g++)
      ck_assert_uint_eq(pages[M3IDX_PAGE_BYTES + 8192 + 4 * t + g], 0);
  }
  /* Wrong page count, bad slot, NULL: an error, nothing written. */
  memset(pages, 0x5a, 2 * M3IDX_PAGE_BYTES);
  ck_assert_int_eq(m3idx_encode_keys_f32(keys, 130, pages, 1), M3IDX_ERR_INCONSISTENT);
  ck_assert_ptr_nonnull(strstr(m3idx_last_error(NULL), "num_pages"));
  ck_assert_int_eq(m3idx_encode_keys_f32(keys, -1, pages, 0), M3IDX_ERR_INVALID_SIZE);
  ck_assert_int_eq(m3idx_page_encode_f32(pages, 128, keys), M3IDX_ERR_INVALID_SIZE);
  ck_assert_ptr_nonnull(strstr(m3idx_last_error(NULL), "slot"));
  ck_assert_int_eq(m3idx_page_encode_f32(pages, -1, keys), M3IDX_ERR_INVALID_SIZE);
  ck_assert_int_eq(m3idx_page_encode_f32(NULL, 0, keys), M3IDX_ERR_NULL_POINTER);
  ck_assert_int_eq(m3idx_page_decode(pages, 0, NULL), M3IDX_ERR_NULL_POINTER);
  for (int i = 0; i < 2 * M3IDX_PAGE_BYTES; i++)
    ck_assert_uint_eq(pages[i], 0x5a);
  free(keys);
  free(pages);
}
END_TEST

/* Every helper's output for a fixed spread of inputs (subnormals, ties,
 * values near each format's edges), as bytes. */
#define ENV_INPUTS 4096
struct helper_outputs {
  uint8_t e4m3[ENV_INPUTS], e2m1[ENV_INPUTS], e8m0[ENV_INPUTS];
  uint16_t bf16[ENV_INPUTS];
  uint32_t back_e4m3[256], back_e8m0[256], back_bf16[ENV_INPUTS];
  uint8_t page[M3IDX_PAGE_BYTES], page_bf16[M3IDX_PAGE_BYTES], pages[2 * M3IDX_PAGE_BYTES];
  float decoded[2][M3IDX_HEAD_DIM];
};

static float input(int i) {
  uint32_t x = (uint32_t)i * 2654435761u;
  x ^= x >> 13;
  x *= 0x5bd1e995u;
  x ^= x >> 15;
  /* Exponents 0..40 (subnormal fp32, their scales), 100..140 (e4m3, e2m1
   * and bf16 ties near 1) and all of them now and then. */
  uint32_t exp = i % 3 == 0 ? (x >> 8) % 41 : i % 3 == 1 ? 100 + (x >> 8) % 41 : (x >> 8) & 0xff;
  uint32_t mant = i % 5 == 0 ? (x & 0x7u) << 19 : x & 0x7fffffu; /* ties: few mantissa bits */
  uint32_t u = (x & 0x80000000u) | exp << 23 | mant;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static void run_helpers(struct helper_outputs *o) {
  static float keys[M3IDX_BLOCK_SIZE + 1][M3IDX_HEAD_DIM];
  static uint16_t key_bf16[M3IDX_HEAD_DIM];
  memset(o, 0, sizeof *o);
  for (int i = 0; i < ENV_INPUTS; i++) {
    float x = input(i);
    o->e4m3[i] = m3idx_float_to_e4m3(x);
    o->e2m1[i] = m3idx_float_to_e2m1(x * 0x1p100f);
    o->e8m0[i] = m3idx_e8m0_for_amax(x);
    o->bf16[i] = m3idx_float_to_bf16(x);
    o->back_bf16[i] = bits(m3idx_bf16_to_float(o->bf16[i]));
  }
  for (int i = 0; i < 256; i++) {
    o->back_e4m3[i] = bits(m3idx_e4m3_to_float((uint8_t)i));
    o->back_e8m0[i] = bits(m3idx_e8m0_to_float((uint8_t)i));
  }
  for (int t = 0; t <= M3IDX_BLOCK_SIZE; t++)
    for (int d = 0; d < M3IDX_HEAD_DIM; d++)
      keys[t][d] = input(t * M3IDX_HEAD_DIM + d) * (t % 2 ? 1.0f : 0x1p-100f);
  for (int d = 0; d < M3IDX_HEAD_DIM; d++)
    key_bf16[d] = (uint16_t)(bits(input(d)) >> 16);
  ck_assert_int_eq(m3idx_page_encode_f32(o->page, 0, keys[0]), M3IDX_OK);
  ck_assert_int_eq(m3idx_page_encode_bf16(o->page_bf16, 0, key_bf16), M3IDX_OK);
  ck_assert_int_eq(m3idx_encode_keys_f32(&keys[0][0], M3IDX_BLOCK_SIZE + 1, o->pages, 2), M3IDX_OK);
  ck_assert_int_eq(m3idx_page_decode(o->page, 0, o->decoded[0]), M3IDX_OK);
  ck_assert_int_eq(m3idx_page_decode(o->pages, 3, o->decoded[1]), M3IDX_OK);
}

/* A -ffast-math program runs with FTZ and DAZ; others change the rounding
 * mode.  Before the helpers entered round-to-nearest with subnormals kept,
 * m3idx_float_to_e4m3 rounded up under FE_UPWARD and the page encoder and
 * decoder flushed subnormal keys under FTZ/DAZ. */
START_TEST(caller_fp_environment) {
  static struct helper_outputs want, got;
  run_helpers(&want);
  static const int modes[] = {FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO};
  for (int m = 0; m < 4; m++) {
#if defined(__x86_64__) || defined(__SSE__)
    unsigned int csr = 0, mine = 0, after = 0;
    __asm__ volatile("stmxcsr %0" : "=m"(csr));
    if (m < 3) {
      fesetround(modes[m]);
    } else {
      mine = csr | 0x8040u; /* FTZ | DAZ */
      __asm__ volatile("ldmxcsr %0" : : "m"(mine));
    }
    __asm__ volatile("stmxcsr %0" : "=m"(mine));
    run_helpers(&got);
    __asm__ volatile("stmxcsr %0" : "=m"(after));
    fesetround(FE_TONEAREST);
    __asm__ volatile("ldmxcsr %0" : : "m"(csr));
    ck_assert_uint_eq(after, mine); /* the caller's mode is given back */
#else
    if (m == 3)
      break;
    fesetround(modes[m]);
    run_helpers(&got);
    ck_assert_int_eq(fegetround(), modes[m]);
    fesetround(FE_TONEAREST);
#endif
    ck_assert_msg(memcmp(got.e4m3, want.e4m3, sizeof want.e4m3) == 0, "float_to_e4m3, mode %d", m);
    ck_assert_msg(memcmp(got.e2m1, want.e2m1, sizeof want.e2m1) == 0, "float_to_e2m1, mode %d", m);
    ck_assert_msg(memcmp(got.e8m0, want.e8m0, sizeof want.e8m0) == 0, "e8m0_for_amax, mode %d", m);
    ck_assert_msg(memcmp(got.bf16, want.bf16, sizeof want.bf16) == 0, "float_to_bf16, mode %d", m);
    ck_assert_msg(memcmp(got.back_bf16, want.back_bf16, sizeof want.back_bf16) == 0, "bf16_to_float, mode %d", m);
    ck_assert_msg(memcmp(got.back_e4m3, want.back_e4m3, sizeof want.back_e4m3) == 0, "e4m3_to_float, mode %d", m);
    ck_assert_msg(memcmp(got.back_e8m0, want.back_e8m0, sizeof want.back_e8m0) == 0, "e8m0_to_float, mode %d", m);
    ck_assert_msg(memcmp(got.page, want.page, sizeof want.page) == 0, "page_encode_f32, mode %d", m);
    ck_assert_msg(memcmp(got.page_bf16, want.page_bf16, sizeof want.page_bf16) == 0, "page_encode_bf16, mode %d", m);
    ck_assert_msg(memcmp(got.pages, want.pages, sizeof want.pages) == 0, "encode_keys_f32, mode %d", m);
    ck_assert_msg(memcmp(got.decoded, want.decoded, sizeof want.decoded) == 0, "page_decode, mode %d", m);
  }
}
END_TEST

/* m3idx_page_decode_f64 against values written out here: every e2m1 code
 * at every scale byte, exact where fp32 overflows (byte 254 x 6 is
 * 1.5 * 2^129); m3idx_page_decode agrees wherever fp32 holds the value. */
START_TEST(page_decode_exact) {
  static const double e2m1_value[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6};
  uint8_t page[M3IDX_PAGE_BYTES];
  double got[M3IDX_HEAD_DIM];
  float got32[M3IDX_HEAD_DIM];
  for (int e = 0; e < 256; e += 4) {
    memset(page, 0, sizeof page);
    for (int slot = 0; slot < 4; slot++) {
      for (int i = 0; i < 64; i++) /* element d holds code d % 16 */
        page[64 * slot + i] = (uint8_t)((2 * i) % 16 | ((2 * i + 1) % 16) << 4);
      for (int g = 0; g < 4; g++)
        page[M3IDX_PAGE_DATA_BYTES + 4 * slot + g] = (uint8_t)(e + slot);
    }
    for (int slot = 0; slot < 4; slot++) {
      int byte = e + slot;
      ck_assert_int_eq(m3idx_page_decode_f64(page, slot, got), M3IDX_OK);
      ck_assert_int_eq(m3idx_page_decode(page, slot, got32), M3IDX_OK);
      for (int d = 0; d < M3IDX_HEAD_DIM; d++) {
        double want = byte == 255 ? NAN : ldexp(e2m1_value[d % 16], byte - 127);
        if (byte == 255) {
          ck_assert_msg(isnan(got[d]), "byte 255 d %d: %g", d, got[d]);
          continue;
        }
        ck_assert_msg(got[d] == want && signbit(got[d]) == signbit(want),
                      "byte %d code %d: %a, want %a", byte, d % 16, got[d], want);
        if (fabs(want) < 0x1p128)
          ck_assert_msg((double)got32[d] == want, "fp32 byte %d code %d", byte, d % 16);
        else
          ck_assert_msg(isinf(got32[d]), "fp32 byte %d code %d: %a", byte, d % 16,
                        (double)got32[d]);
      }
    }
  }
  double key[M3IDX_HEAD_DIM];
  ck_assert_int_eq(m3idx_page_decode_f64(page, 128, key), M3IDX_ERR_INVALID_SIZE);
  ck_assert_int_eq(m3idx_page_decode_f64(NULL, 0, key), M3IDX_ERR_NULL_POINTER);
  ck_assert_int_eq(m3idx_page_decode_f64(page, 0, NULL), M3IDX_ERR_NULL_POINTER);
}
END_TEST

int main(void) {
  Suite *s = suite_create("formats");
  TCase *t = tcase_create("formats");
  tcase_add_test(t, bf16);
  tcase_add_test(t, e4m3);
  tcase_add_test(t, e2m1);
  tcase_add_test(t, e8m0);
  tcase_add_test(t, nan_scale_bytes);
  tcase_add_test(t, page_encode_hand_computed);
  tcase_add_test(t, page_round_trip);
  tcase_add_test(t, encode_keys);
  tcase_add_test(t, caller_fp_environment);
  tcase_add_test(t, page_decode_exact);
  suite_add_tcase(s, t);
  return run_suite(s);
}
