/*
 * patterns.c - the call patterns (see patterns.h).
 *
 * SPDX-License-Identifier: MIT
 */
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

/* Long rows: more than 1024 blocks. */
static void long_rows(int v, case_sink each, void *arg) {
  static const int32_t lens[] = {131072 + 77};
  static const int32_t ctx[] = {131200};
  static const int32_t q[] = {2};
  (void)v;
  each(case_decode(7000u, FLAVOR_PLAIN, 1, 2, M3IDX_DTYPE_BF16, 1, lens), arg);
  each(case_prefill(7001u, FLAVOR_PLAIN, 2, M3IDX_DTYPE_E4M3, 1, ctx, q), arg);
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
