/*
 * patterns.c - the call patterns (see patterns.h).
 *
 * SPDX-License-Identifier: MIT
 */
#include <math.h>
#include <string.h>

#include "patterns.h"

static const int32_t edge_lens[] = {1, 2, 127, 128, 129, 255, 256, 257,
                                    2047, 2048, 2049, 2176, 2177, 3000};
#define NEDGE ((int)(sizeof edge_lens / sizeof edge_lens[0]))

/* Decode, query_len 1..4 (the variant), H 1 and 4, bf16 and e4m3; lengths
 * at every block edge and at 16 and 17 causal blocks. */
static void decode_query_lens(int v, case_sink each, void *arg) {
  int qlen = v + 1;
  for (int H = 1; H <= 4; H += 3)
    for (int dt = 1; dt <= 2; dt++) {
      int32_t lens[NEDGE];
      int n = 0;
      for (int i = 0; i < NEDGE; i++)
        if (edge_lens[i] >= qlen)
          lens[n++] = edge_lens[i];
      each(case_decode(1000u + 10u * (unsigned)qlen + (unsigned)(H * 2 + dt), FLAVOR_PLAIN, H,
                       qlen, (m3idx_dtype)dt, n, lens),
           arg);
    }
}

/* Prefill: with and without context, rows crossing 127/128/129. */
static void prefill_context(int v, case_sink each, void *arg) {
  static const int32_t ctx0[] = {0, 0, 0, 0, 0};
  static const int32_t q0[] = {1, 127, 128, 129, 300};
  static const int32_t ctx1[] = {1, 126, 127, 128, 129, 2040, 2048, 5000};
  static const int32_t q1[] = {1, 1, 2, 1, 130, 9, 1, 64};
  (void)v;
  for (int H = 1; H <= 4; H += 3)
    for (int dt = 1; dt <= 2; dt++) {
      each(case_prefill(2000u + (unsigned)(H * 2 + dt), FLAVOR_PLAIN, H, (m3idx_dtype)dt, 5,
                        ctx0, q0),
           arg);
      each(case_prefill(2100u + (unsigned)(H * 2 + dt), FLAVOR_PLAIN, H, (m3idx_dtype)dt, 8,
                        ctx1, q1),
           arg);
    }
}

/* Prefill requests with no rows next to ones with rows. */
static void prefill_empty_requests(int v, case_sink each, void *arg) {
  static const int32_t ctx[] = {500, 0, 129, 0};
  static const int32_t q[] = {0, 3, 0, 200};
  (void)v;
  each(case_prefill(2200u, FLAVOR_PLAIN, 2, M3IDX_DTYPE_BF16, 4, ctx, q), arg);
}

/* Forced blocks (0,0), (1,2), (16,0), (0,16), (3,13), (0,1) at the 16/17 edge. */
static void forced_blocks(int v, case_sink each, void *arg) {
  static const int fb[][2] = {{0, 0}, {1, 2}, {16, 0}, {0, 16}, {3, 13}, {0, 1}};
  static const int32_t lens[] = {2, 128, 129, 1920, 2048, 2049, 2176, 2177, 4000};
  static const int32_t ctx[] = {0, 1900, 2047};
  static const int32_t q[] = {2177, 200, 3};
  struct test_case *tc = case_decode(3000u + (unsigned)v, FLAVOR_PLAIN, 2, 2, M3IDX_DTYPE_BF16,
                                     9, lens);
  case_set_forced(tc, fb[v][0], fb[v][1]);
  each(tc, arg);
  tc = case_prefill(3100u + (unsigned)v, FLAVOR_PLAIN, 1, M3IDX_DTYPE_E4M3, 3, ctx, q);
  case_set_forced(tc, fb[v][0], fb[v][1]);
  each(tc, arg);
}

/* e8m0 scales 0, 254, 255 (NaN); NaN, inf, subnormal and huge queries. */
static void special_values(int v, case_sink each, void *arg) {
  static const int32_t lens[] = {5, 130, 700, 2100};
  static const int32_t ctx[] = {0, 300};
  static const int32_t q[] = {260, 40};
  for (int dt = 1; dt <= 2; dt++) {
    each(case_decode(4000u + (unsigned)(dt * 10 + v), FLAVOR_SPECIAL, 4, 3, (m3idx_dtype)dt, 4,
                     lens),
         arg);
    each(case_prefill(4100u + (unsigned)(dt * 10 + v), FLAVOR_SPECIAL, 2, (m3idx_dtype)dt, 2,
                      ctx, q),
         arg);
  }
}

/* Few distinct values: block-score ties, broken by the smaller id. */
static void ties(int v, case_sink each, void *arg) {
  static const int32_t lens[] = {3000, 129, 2177};
  static const int32_t ctx[] = {1000};
  static const int32_t q[] = {300};
  int dt = 1 + v;
  each(case_decode(5000u + (unsigned)dt, FLAVOR_TIES, 2, 2, (m3idx_dtype)dt, 3, lens), arg);
  each(case_prefill(5100u + (unsigned)dt, FLAVOR_TIES, 1, (m3idx_dtype)dt, 1, ctx, q), arg);
}

/* Requests of one token, alone and in a batch. */
static void one_token(int v, case_sink each, void *arg) {
  static const int32_t one[] = {1};
  static const int32_t many[] = {1, 1, 1, 2};
  static const int32_t ctx[] = {0};
  (void)v;
  each(case_decode(6000u, FLAVOR_PLAIN, 1, 1, M3IDX_DTYPE_BF16, 1, one), arg);
  each(case_decode(6001u, FLAVOR_PLAIN, 4, 1, M3IDX_DTYPE_E4M3, 4, many), arg);
  each(case_prefill(6002u, FLAVOR_PLAIN, 4, M3IDX_DTYPE_BF16, 1, ctx, one), arg);
}

/* Logits that round to zero: a scale of 2^-149 and query elements of
 * magnitude 2^-20 .. 2^-13, so that dot products are below 0.5 and
 * their logits round to zero, negative ones to -0, which must come out +0
 * (SPEC section 4) on every path: one (row, head) a page (v 0), several
 * (v 1); short requests, so that many blocks' causal logits are all
 * zeros. */
static void tiny_scale(int v, case_sink each, void *arg) {
  static const int32_t lens[] = {2, 2, 3, 130, 1000, 5, 2, 2};
  struct test_case *tc = case_decode(7000u + (unsigned)v, FLAVOR_PLAIN, 1 + v, 1 + v,
                                     M3IDX_DTYPE_BF16, 8, lens);
  uint16_t *q = tc->query_data;
  uint64_t rs = 7000u + (unsigned)v;
  for (size_t i = 0; i < (size_t)tc->batch.num_rows * tc->batch.num_heads * 128; i++) {
    uint64_t r = case_rand(&rs);
    q[i] = (uint16_t)((r & 0x807f) | (107u + r % 8u) << 7); /* +-2^-20 .. 2^-13 */
  }
  case_set_scale(tc, 0x1p-149f);
  each(tc, arg);
}

/* SPEC v2's rounding, stressed: queries of integer-like bf16 values
 * (+-m * 2^j, m < 256) and keys with one scale byte, so that D is an
 * integer (times a power of two) of about 2^24..2^26, where fp32 must
 * round and exact halfway cases (ties to even) are common.  The scale
 * decides where the rounding falls: v 0 at 2^24 (scale 1), v 1 at fp32's
 * overflow edge (2^103: D >= 2^25 - 1/2 rounds to inf), v 2 among the
 * subnormals (2^-140), v 3 on an odd scale (3, only the multiply rounds),
 * v 4 a negative one (-1: the smallest D wins).  v 5: rows spanning more
 * than 60 binades and keys whose scale bytes span 0..254, so every key
 * takes the exact path; v 6: keys whose groups cancel exactly (D = 0, a +0
 * logit) beside ones that do not; v 7: e4m3 queries of +-448 against
 * scale bytes 254 (+-inf and NaN logits among finite ones); v 8: see
 * double_rounding. */
static void double_rounding(case_sink each, void *arg);
static void exact_rounding(int v, case_sink each, void *arg) {
  if (v == 8) {
    double_rounding(each, arg);
    return;
  }
  static const int32_t lens[] = {3, 129, 700, 2100};
  static const float scales[] = {1.0f, 0x1p103f, 0x1p-140f, 3.0f, -1.0f, 0.5f, 1.0f, 1.0f};
  const m3idx_dtype dt = v == 7 ? M3IDX_DTYPE_E4M3 : M3IDX_DTYPE_BF16;
  struct test_case *tc = case_decode(7100u + (unsigned)v, FLAVOR_PLAIN, 2, 2, dt, 4, lens);
  uint64_t rs = 7100u + (unsigned)v;
  const size_t nq = (size_t)tc->batch.num_rows * tc->batch.num_heads * 128;
  for (size_t i = 0; i < nq; i++) {
    uint64_t r = case_rand(&rs);
    if (v == 7) {
      ((uint8_t *)tc->query_data)[i] = (uint8_t)(r % 8 == 0 ? 0x7e : r % 8 == 1 ? 0xfe : r >> 8);
      if ((((uint8_t *)tc->query_data)[i] & 0x7f) == 0x7f)
        ((uint8_t *)tc->query_data)[i] ^= 1; /* no NaN query */
      continue;
    }
    /* bf16 +-m * 2^j: exponent field 127 + j; v 5 spans 2^-120 .. 2^100 */
    const unsigned j = v == 5 ? (unsigned)((r >> 20) % 221) - 120u : 8u + (unsigned)((r >> 20) % 8);
    uint16_t b = (uint16_t)(((127u + j) << 7) | (r & 0x7fu) | (r & 0x100u ? 0x8000u : 0u));
    ((uint16_t *)tc->query_data)[i] = (r >> 40) % 16 == 0 ? 0 : b;
  }
  for (int p = 0; p < tc->kcache.num_pages; p++) {
    uint8_t *pg = tc->pages + (size_t)p * M3IDX_PAGE_BYTES;
    for (int t = 0; t < 128; t++) {
      uint64_t r = case_rand(&rs);
      for (int g = 0; g < 4; g++)
        pg[8192 + 4 * t + g] = v == 5 ? (uint8_t)(g == 0 ? 0 : g == 3 ? 254 : r >> (8 * g))
                               : v == 7 ? (uint8_t)(t % 2 ? 254 : 127)
                                        : 127;
      if (v == 6 && t % 2 == 0) {
        /* group 1 is group 0 negated, group 3 group 2: D = 0 exactly,
           however the row's elements sum */
        for (int i = 0; i < 16; i++) {
          pg[64 * t + 16 + i] = (uint8_t)(pg[64 * t + i] ^ 0x88u);
          pg[64 * t + 48 + i] = (uint8_t)(pg[64 * t + 32 + i] ^ 0x88u);
        }
      }
    }
  }
  if (v == 6) /* the groups' elements of a row agree, so the negated ones cancel */
    for (size_t row = 0; row < nq / 128; row++)
      for (int d = 0; d < 32; d++) {
        uint16_t *q = (uint16_t *)tc->query_data + 128 * row;
        q[32 + d] = q[d];
        q[96 + d] = q[64 + d];
      }
  case_set_scale(tc, scales[v]);
  each(tc, arg);
}

/* A D of 36 bits whose product with the scale, rounded to fp64 first,
 * would land exactly halfway between two fp32 values and round the wrong
 * way (found by a search: scale * D = M * 2^35 - 57 with M odd).  The
 * row's elements are D's bytes (q[i] = byte i * 2^(8i)), key slot 0 sums
 * them (e2m1 1.0, scale byte 127), the other slots are zero; the row's
 * span allows the fp64 path, so it is the fp64 rounding that is tested. */
static void double_rounding(case_sink each, void *arg) {
  static const int32_t lens[] = {130};
  const uint64_t D = 0xd03ebadbdull;
  struct test_case *tc = case_decode(7108u, FLAVOR_PLAIN, 1, 1, M3IDX_DTYPE_BF16, 1, lens);
  uint16_t *q = tc->query_data;
  for (int d = 0; d < 128; d++)
    q[d] = d < 5 ? m3idx_float_to_bf16(ldexpf((float)((D >> (8 * d)) & 255u), 8 * d)) : 0;
  for (int p = 0; p < tc->kcache.num_pages; p++) {
    uint8_t *pg = tc->pages + (size_t)p * M3IDX_PAGE_BYTES;
    memset(pg, 0, 8192);
    memset(pg + 8192, 127, 512);
    pg[0] = pg[1] = 0x22; /* elements 0..3: 1.0 */
    pg[2] = 0x02;         /* element 4: 1.0 */
  }
  case_set_scale(tc, (float)0xd351d3 * 0x1p-23f);
  each(tc, arg);
}

/* Keys whose order a cheap approximation gets wrong.  The row is 1.0,
 * 1.5 * 2^-14 and 2^-13 (the rest 0); key X holds codes 1.0, 0, 0.5 in
 * elements 0..2 (D = 2 + 2^-13 halves), key Y holds 1.0, 6.0, 0
 * (D = 2 + 9 * 2^-13): cut to 15-bit integers (as the CPU's vnni filter
 * does), X looks larger, so a filter without its error margin scores the
 * block as X.  Every page is X but slot 5 (Y).  v 0: scale 1 (Y wins); v 1: scale -1 (the smallest,
 * X, wins); v 2: every other row all zero (every D is 0), and rows of
 * tiny elements that the integer cut drops entirely.  v 3: the same for an
 * fp32 sum in element order (the GPU's filter): the row is 2^24, 1.25,
 * 0.75, 0.75, -2^24; X holds 1.0 in elements 0, 1 and 4 (fp32 rounds
 * 2^24 + 1.25 up to 2^24 + 2: A = 2, D = 1.25), Y in elements 0, 2, 3 and 4
 * (each 0.75 is rounded away: A = 0, D = 1.5).  v 4: the same for the
 * vnni kernel's one-plane filter (lib/filter-cut.h; 3 heads x 2 rows, so
 * six rows a page take it): the row is 1.0 and 31 elements of 2^-7, which P (63.5 q rounded)
 * drops; X holds 4.0 in element 0, Y 3.0 and then 6.0 in the 31, so H
 * puts X 16128 above Y while D' puts Y 7363 above X, which Y's bound B
 * (24200) covers and half of it would not.  v 5: v 4 negated, scale -1.
 * v 6: the same for the tensor-core filter's 12-bit cut (z = 4096 q):
 * the row is 1.0, 100 elements of -1.9921875 * 2^-12 (z just above -2, Q
 * = -1) and 27 of -100 * 2^-12 (exact); X holds 1.0 and then 6.0 in the
 * 100 (A = 8192 - 1200, D = 8192 - 2390.6), Y 1.0 and then 6.0, 4.0 and
 * 1.5 in the first three of the 27 (A = D = 8192 - 2300): X's A is 1100
 * above Y's, Y's D 90.6 above X's.  v 7: v 6 negated, scale -1.  v 8:
 * the tensor-core filter's per-key interval near its width (2 e_k = 3120
 * for scale bytes 127): the row is 1.0, 63 elements of -1.9921875 * 2^-12
 * and 64 of +1.9921875 * 2^-12 (|z| just below 2, |Q| = 1); X holds 1.0
 * and then 6.0 in the 63 and -6.0 in the 64 (A = 8192 - 1524 lies 1512
 * above D = 8192 - 3036.1), Y 0.5 and then -6.0 in the first 45 (A = 4096
 * + 540 lies 535.8 below D = 4096 + 1075.8): X's A is 2032 above Y's, Y's
 * D 15.9 above X's, so a width of e_k, or e_k at half, loses Y (4 heads x
 * 4 rows: 16 pairs a request, which the gemm row takes).  v 9: v 8
 * negated, scale -1. */
static void filter_bound(int v, case_sink each, void *arg) {
  static const int32_t lens[] = {130, 1000, 129, 4000};
  struct test_case *tc = case_decode(7200u + (unsigned)v, FLAVOR_PLAIN,
                                     v == 4 || v == 5 ? 3 : v >= 8 ? 4 : 2, v >= 8 ? 4 : 2,
                                     M3IDX_DTYPE_BF16, 4, lens);
  uint16_t *q = tc->query_data;
  const size_t nrows = (size_t)tc->batch.num_rows * tc->batch.num_heads;
  for (size_t r = 0; r < nrows; r++) {
    uint16_t *row = q + 128 * r;
    memset(row, 0, 128 * sizeof *row);
    if (v == 2 && r % 2 == 1)
      continue; /* all zero */
    if (v >= 4) { /* 1.0, then the variant's small elements; v 5, 7, 9 negated */
      const float sign = v % 2 == 1 ? -1.0f : 1.0f;
      row[0] = m3idx_float_to_bf16(sign);
      for (int d = 1; d < (v >= 6 ? 128 : 32); d++) {
        const float e = v >= 8   ? (d < 64 ? -0x1.fep-12f : 0x1.fep-12f)
                        : v >= 6 ? (d <= 100 ? -0x1.fep-12f : -100.0f * 0x1p-12f)
                                 : 0x1p-7f;
        row[d] = m3idx_float_to_bf16(sign * e);
      }
      continue;
    }
    if (v == 3) {
      row[0] = m3idx_float_to_bf16(0x1p24f);
      row[1] = m3idx_float_to_bf16(1.25f);
      row[2] = row[3] = m3idx_float_to_bf16(0.75f);
      row[4] = m3idx_float_to_bf16(-0x1p24f);
      continue;
    }
    row[0] = m3idx_float_to_bf16(v == 2 && r % 4 == 2 ? 0x1p-20f : 1.0f);
    row[1] = m3idx_float_to_bf16(v == 2 && r % 4 == 2 ? 0x1.8p-34f : 0x1.8p-14f);
    row[2] = m3idx_float_to_bf16(v == 2 && r % 4 == 2 ? 0x1p-33f : 0x1p-13f);
  }
  for (int p = 0; p < tc->kcache.num_pages; p++) {
    uint8_t *pg = tc->pages + (size_t)p * M3IDX_PAGE_BYTES;
    memset(pg, 0, M3IDX_PAGE_DATA_BYTES);
    memset(pg + M3IDX_PAGE_DATA_BYTES, 127, 512);
    for (int t = 0; t < 128; t++) {
      if (v >= 6) { /* v 6, 7: X 1.0 (code 2), 6.0 (code 7) x 100; Y 1.0, then 6.0, 4.0,
                       1.5.  v 8, 9: X 1.0, 6.0 x 63, -6.0 (code 15) x 64; Y 0.5 (code 1),
                       then -6.0 x 45 */
        uint8_t *k = pg + 64 * t;
        for (int d = 0; d < 128; d++) {
          const unsigned code = v >= 8 ? (t != 5 ? (d == 0 ? 2u : d < 64 ? 7u : 15u)
                                                 : (d == 0 ? 1u : d <= 45 ? 15u : 0u))
                                : d == 0               ? 2u
                                : t != 5 && d <= 100   ? 7u
                                : t == 5 && d == 101   ? 7u
                                : t == 5 && d == 102   ? 6u
                                : t == 5 && d == 103   ? 3u
                                                       : 0u;
          k[d / 2] |= (uint8_t)(code << (4 * (d & 1)));
        }
        continue;
      }
      if (v >= 4) { /* X: 4.0 (code 6); Y: 3.0 (code 5), then 6.0 (code 7) */
        pg[64 * t] = t == 5 ? 0x75 : 0x06;
        for (int i = 1; i < 16; i++)
          pg[64 * t + i] = t == 5 ? 0x77 : 0x00;
        continue;
      }
      if (v == 3) {
        pg[64 * t] = t == 5 ? 0x02 : 0x22;     /* elements 0, 1 */
        pg[64 * t + 1] = t == 5 ? 0x22 : 0x00; /* elements 2, 3 */
        pg[64 * t + 2] = 0x02;                 /* element 4 */
        continue;
      }
      pg[64 * t] = t == 5 ? 0x72 : 0x02; /* elements 0, 1 */
      pg[64 * t + 1] = t == 5 ? 0x00 : 0x01; /* element 2 */
    }
  }
  case_set_scale(tc, v == 1 || v == 5 || v == 7 || v == 9 ? -1.0f : 1.0f);
  each(tc, arg);
}

/* The vnni kernel's exact D from the row's cut (lib/filter-cut.h): the
 * elements whose 15-bit Q drops low bits (residuals) add their products.
 * Rows r % 4: 0, exactly 16 residuals (the most the cut takes); 1, 17
 * (the fp64 path instead); 2, elements 0 and 1 (1.5 and -1.5, equal codes
 * in every key) cancel and the others but the residuals are 0, so D is
 * the residuals' products alone, whose lowest bit is 2^-41 below the
 * row's top (span 41, the most fp64 sums allow); 3, the same, where an
 * odd key's fourth scale byte is one higher (spread 1: those keys take the
 * exact path).  In rows 0 and 1 the other elements are multiples of 2^-6
 * (no residual).  v 0: scale 1; v 1: scale -1. */
static void cut_residuals(int v, case_sink each, void *arg) {
  static const int32_t lens[] = {128, 300, 1000, 4000};
  struct test_case *tc = case_decode(7300u + (unsigned)v, FLAVOR_PLAIN, 2, 2,
                                     M3IDX_DTYPE_BF16, 4, lens);
  uint64_t rs = 7300u + (unsigned)v;
  uint16_t *q = tc->query_data;
  const size_t nrows = (size_t)tc->batch.num_rows * tc->batch.num_heads;
  for (size_t r = 0; r < nrows; r++) {
    uint16_t *row = q + 128 * r;
    const int kind = (int)(r % 4), tiny = kind == 1 ? 17 : 16;
    for (int d = 0; d < 128; d++) { /* +-k * 2^-6, k < 64; 0 in rows 2 and 3 */
      const uint64_t x = case_rand(&rs);
      row[d] = kind >= 2 ? 0
                         : m3idx_float_to_bf16(ldexpf((float)(x % 64), -6) * (x & 64 ? -1.0f : 1.0f));
    }
    row[0] = m3idx_float_to_bf16(kind >= 2 ? 1.5f : 1.0f);
    if (kind >= 2)
      row[1] = m3idx_float_to_bf16(-1.5f);
    for (int i = 0; i < tiny; i++) { /* (1 + odd / 128) 2^-34 or 2^-20 * (1 + odd / 128) */
      const uint64_t x = case_rand(&rs);
      const float m = 1.0f + (float)(2 * (x % 64) + 1) / 128.0f;
      row[2 + 7 * i] = m3idx_float_to_bf16(ldexpf(m, kind >= 2 ? -34 : -20) *
                                           (x & 64 ? -1.0f : 1.0f));
    }
  }
  for (int p = 0; p < tc->kcache.num_pages; p++) {
    uint8_t *pg = tc->pages + (size_t)p * M3IDX_PAGE_BYTES;
    for (int t = 0; t < 128; t++) {
      pg[64 * t] = (uint8_t)((pg[64 * t] & 15u) * 17u); /* elements 0, 1: one code */
      memset(pg + M3IDX_PAGE_DATA_BYTES + 4 * t, 127, 4);
      if (t % 2)
        pg[M3IDX_PAGE_DATA_BYTES + 4 * t + 3] = 128;
    }
  }
  case_set_scale(tc, v == 1 || v == 5 || v == 7 ? -1.0f : 1.0f);
  each(tc, arg);
}

/* Long rows: more than 1024 blocks. */
static void long_rows(int v, case_sink each, void *arg) {
  static const int32_t lens[] = {131072 + 77};
  static const int32_t ctx[] = {131200};
  static const int32_t q[] = {2};
  (void)v;
  each(case_decode(7000u, FLAVOR_PLAIN, 1, 2, M3IDX_DTYPE_BF16, 1, lens), arg);
  each(case_prefill(7001u, FLAVOR_PLAIN, 2, M3IDX_DTYPE_E4M3, 1, ctx, q), arg);
}

/* Roughly normal (two uniforms from r's low 32 bits, added), within 3.3. */
static float roughly_normal(uint64_t r) {
  return ((float)(r & 0xffff) + (float)(r >> 16 & 0xffff) - 65535.0f) / 20000.0f;
}

static uint16_t mixed_row_value(uint64_t *rs, int kind, int d, int hot) {
  const uint64_t r = case_rand(rs);
  static const float fixed[] = {448.0f, -448.0f, 0x1p-9f, -0.5f, 1.125f, 0.0f};
  const float normal = roughly_normal(r);
  switch (kind) {
  case 0: return m3idx_float_to_bf16(normal);
  case 1: return (uint16_t)((r >> 32 & 0x807f) | (r >> 40) % 255 << 7); /* any finite */
  case 2: return m3idx_float_to_bf16(d == hot ? 1000.0f : normal * 0x1p-10f);
  case 3: return r % 4 == 0 ? (uint16_t)(r >> 32 & 0x807f) : 0; /* subnormal or zero */
  case 4: return m3idx_float_to_bf16(fixed[r % 6]);
  case 5: return r % 40 == 0 ? (uint16_t)(r & 0x100 ? 0x7f80 : 0xff80)
                 : r % 60 == 1 ? (uint16_t)0x7fc0 : m3idx_float_to_bf16(normal);
  case 6: return (uint16_t)((r >> 32 & 0x807f) | (100 + (r >> 40) % 40) << 7);
  default: return 0;
  }
}

static void mixed_page(uint64_t *rs, uint8_t *pg) {
  const int keys = (int)(case_rand(rs) % 6), scales = (int)(case_rand(rs) % 5);
  if (keys == 5) { /* normal floats, every eighth key ten times larger */
    float k[128 * 128];
    for (int i = 0; i < 128 * 128; i++) {
      const float x = roughly_normal(case_rand(rs));
      k[i] = (i / 128) % 8 == 0 ? 10.0f * x : x;
    }
    (void)m3idx_encode_keys_f32(k, 128, pg, 1);
    return;
  }
  for (int i = 0; i < M3IDX_PAGE_DATA_BYTES; i++) {
    const uint8_t b = (uint8_t)case_rand(rs);
    pg[i] = keys == 0   ? b
            : keys == 1 ? (b % 3 == 0 ? b : 0)          /* sparse */
            : keys == 2 ? (i < 192 ? b : pg[i % 192])   /* three keys, repeated */
            : keys == 3 ? (i < 64 ? b : (uint8_t)(pg[i % 64] ^ (b % 50 == 0))) /* near copies */
                        : (uint8_t)(b & 0x77);          /* positive codes only */
  }
  for (int i = 0; i < 512; i++) {
    const uint64_t r = case_rand(rs);
    pg[M3IDX_PAGE_DATA_BYTES + i] =
        (uint8_t)(scales == 0   ? 120 + r % 15
                  : scales == 1 ? r % 256
                  : scales == 2 ? (r % 8 == 0 ? 255 : 127)
                  : scales == 3 ? (r % 2 ? 0 : 254)
                                : (uint64_t)(127 + i % 4));
  }
}

/* Pages and rows drawn from many kinds at once, so that a filter's page
 * mixes what each path takes apart: keys random, sparse, repeated (ties),
 * near copies or encoded from normal floats with outliers; scale bytes
 * narrow, anywhere (255 included), 0 / 254 or one a group; rows normal,
 * of any finite bf16 (e4m3 in v5: any byte, NaN included), one large
 * element over tiny ones, subnormal, +-448 and friends, normal with
 * +-inf and NaN, all zero, or a copy of the row before.  Variant v sets
 * the rows a page (1, 3, 6, 8, 16: each kernel's paths) and the scale:
 * 1, -1/8, 2^-140, -3e30, +0 and -0. */
static void mixed_pages(int v, case_sink each, void *arg) {
  static const int heads[] = {1, 3, 2, 4, 4, 1}, qlens[] = {1, 1, 3, 2, 4, 1};
  static const float scale[] = {1.0f, -0.125f, 0x1p-140f, -3e30f, 0.0f, -0.0f};
  static const int32_t lens[] = {130, 700, 4, 383, 256};
  uint64_t rs = 7400u + (uint64_t)v;
  const m3idx_dtype dt = v == 5 ? M3IDX_DTYPE_E4M3 : M3IDX_DTYPE_BF16;
  struct test_case *tc =
      case_decode(7410u + (unsigned)v, FLAVOR_PLAIN, heads[v], qlens[v], dt, 5, lens);
  for (int p = 0; p < tc->kcache.num_pages; p++)
    mixed_page(&rs, tc->pages + (size_t)p * M3IDX_PAGE_BYTES);
  const size_t nrows = (size_t)tc->batch.num_rows * tc->batch.num_heads;
  for (size_t r = 0; r < nrows; r++) {
    const int kind = (int)(case_rand(&rs) % 9), hot = (int)(case_rand(&rs) % 128);
    for (int d = 0; d < 128; d++) {
      const size_t i = 128 * r + (size_t)d;
      if (dt == M3IDX_DTYPE_E4M3)
        ((uint8_t *)tc->query_data)[i] = (uint8_t)case_rand(&rs);
      else if (kind == 8 && r > 0)
        ((uint16_t *)tc->query_data)[i] = ((uint16_t *)tc->query_data)[i - 128];
      else
        ((uint16_t *)tc->query_data)[i] = mixed_row_value(&rs, kind, d, hot);
    }
  }
  case_set_scale(tc, scale[v]);
  each(tc, arg);
}

/* Batches of random lengths and shapes. */
static void random_batches(int v, case_sink each, void *arg) {
  uint64_t rs = 8000u + (uint64_t)v;
  int nreq = 1 + (int)(case_rand(&rs) % 24), qlen = 1 + (int)(case_rand(&rs) % 4);
  int H = 1 + (int)(case_rand(&rs) % 4);
  int32_t lens[24], ctx[24], q[24];
  for (int r = 0; r < nreq; r++) {
    lens[r] = qlen + (int32_t)(case_rand(&rs) % 6000);
    ctx[r] = (int32_t)(case_rand(&rs) % 4000);
    q[r] = (int32_t)(case_rand(&rs) % 150);
  }
  m3idx_dtype dt = (m3idx_dtype)(1 + v % 2);
  struct test_case *tc = case_decode(8100u + (uint64_t)v, FLAVOR_PLAIN, H, qlen, dt, nreq, lens);
  case_set_forced(tc, (int)(case_rand(&rs) % 5), (int)(case_rand(&rs) % 5));
  each(tc, arg);
  tc = case_prefill(8200u + (uint64_t)v, FLAVOR_PLAIN, H, dt, nreq, ctx, q);
  case_set_forced(tc, (int)(case_rand(&rs) % 5), (int)(case_rand(&rs) % 5));
  each(tc, arg);
}

/* 64 requests, and rows of up to 1M tokens (checked against the CPU). */
static void large(int v, case_sink each, void *arg) {
  if (v == 0) {
    int32_t lens[64];
    uint64_t rs = 9100u;
    for (int r = 0; r < 64; r++)
      lens[r] = 4 + (int32_t)(case_rand(&rs) % 40000);
    each(case_decode(9101u, FLAVOR_PLAIN, 2, 4, M3IDX_DTYPE_BF16, 64, lens), arg);
  } else if (v == 1) {
    static const int32_t lens[] = {1 << 20, 777777};
    each(case_decode(9102u, FLAVOR_SPECIAL, 1, 1, M3IDX_DTYPE_BF16, 2, lens), arg);
  } else {
    static const int32_t ctx[] = {(1 << 20) - 300};
    static const int32_t q[] = {300};
    each(case_prefill(9103u, FLAVOR_PLAIN, 1, M3IDX_DTYPE_E4M3, 1, ctx, q), arg);
  }
}

const struct pattern m3idx_patterns[] = {
    {"decode_query_lens", 4, 0, decode_query_lens},
    {"prefill_context", 1, 0, prefill_context},
    {"prefill_empty_requests", 1, 0, prefill_empty_requests},
    {"forced_blocks", 6, 0, forced_blocks},
    {"special_values", 3, 0, special_values},
    {"ties", 2, 0, ties},
    {"tiny_scale", 2, 0, tiny_scale},
    {"exact_rounding", 9, 0, exact_rounding},
    {"filter_bound", 10, 0, filter_bound},
    {"cut_residuals", 2, 0, cut_residuals},
    {"mixed_pages", 6, 0, mixed_pages},
    {"one_token", 1, 0, one_token},
    {"long_rows", 1, 0, long_rows},
    {"random_batches", 8, 0, random_batches},
    {"large", 3, 1, large},
};
const int m3idx_npatterns = (int)(sizeof m3idx_patterns / sizeof m3idx_patterns[0]);

int patterns_total(void) {
  int total = 0;
  for (int p = 0; p < m3idx_npatterns; p++)
    total += m3idx_patterns[p].variants;
  return total;
}

void patterns_run(int index, int with_gpu_only, case_sink each, void *arg) {
  for (int p = 0; p < m3idx_npatterns; p++) {
    if (index < m3idx_patterns[p].variants) {
      if (with_gpu_only || !m3idx_patterns[p].gpu_only)
        m3idx_patterns[p].make(index, each, arg);
      return;
    }
    index -= m3idx_patterns[p].variants;
  }
}
