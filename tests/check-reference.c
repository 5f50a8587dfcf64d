/*
 * check-reference.c - the library against the independent oracle, byte for
 * byte, on seeded random calls of every pattern (decode query_len 1..4,
 * prefill with and without context, block edges, forced blocks, special
 * values, long rows), on whichever backend AUTO / M3IDX_BACKEND picks.
 *
 * SPDX-License-Identifier: MIT
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "results.h"

/* Run tc through the library and the oracle; fail the test on a difference. */
static void check_case(struct test_case *tc) {
  m3idx_options o;
  m3idx_context *ctx = NULL;
  char why[512];
  case_options(tc, &o);
  m3idx_status st = m3idx_context_create(&o, &ctx);
  ck_assert_msg(st == M3IDX_OK, "context: %s", m3idx_last_error(NULL));
  struct case_results lib, ref;
  int rc = results_from_library(ctx, tc, &lib, why, sizeof why);
  ck_assert_msg(rc == 0, "%s", why);
  results_from_oracle(tc, &ref);
  rc = results_compare(tc, &lib, &ref, why, sizeof why);
  ck_assert_msg(rc == 0, "library vs oracle (%s backend): %s",
                m3idx_context_backend(ctx) == M3IDX_BACKEND_HIP ? "HIP" : "CPU", why);
  results_free(&lib);
  results_free(&ref);
  m3idx_context_destroy(ctx);
  case_free(tc);
}

static const int32_t edge_lens[] = {1, 2, 127, 128, 129, 255, 256, 257,
                                    2047, 2048, 2049, 2176, 2177, 3000};
#define NEDGE ((int)(sizeof edge_lens / sizeof edge_lens[0]))

/* Decode, query_len 1..4 (the loop index), H 1 and 4, bf16 and e4m3. */
START_TEST(decode_query_lens) {
  int qlen = _i + 1;
  for (int H = 1; H <= 4; H += 3)
    for (int dt = 1; dt <= 2; dt++) {
      int32_t lens[NEDGE];
      int n = 0;
      for (int i = 0; i < NEDGE; i++)
        if (edge_lens[i] >= qlen)
          lens[n++] = edge_lens[i];
      check_case(case_decode(1000u + 10u * (unsigned)qlen + (unsigned)(H * 2 + dt), FLAVOR_PLAIN,
                             H, qlen, (m3idx_dtype)dt, n, lens));
    }
}
END_TEST

/* Prefill: with and without context, rows crossing 127/128/129. */
START_TEST(prefill_context) {
  static const int32_t ctx0[] = {0, 0, 0, 0, 0};
  static const int32_t q0[] = {1, 127, 128, 129, 300};
  static const int32_t ctx1[] = {1, 126, 127, 128, 129, 2040, 2048, 5000};
  static const int32_t q1[] = {1, 1, 2, 1, 130, 9, 1, 64};
  for (int H = 1; H <= 4; H += 3)
    for (int dt = 1; dt <= 2; dt++) {
      check_case(case_prefill(2000u + (unsigned)(H * 2 + dt), FLAVOR_PLAIN, H,
                              (m3idx_dtype)dt, 5, ctx0, q0));
      check_case(case_prefill(2100u + (unsigned)(H * 2 + dt), FLAVOR_PLAIN, H,
                              (m3idx_dtype)dt, 8, ctx1, q1));
    }
}
END_TEST

/* Prefill requests with no rows next to ones with rows. */
START_TEST(prefill_empty_requests) {
  static const int32_t ctx[] = {500, 0, 129, 0};
  static const int32_t q[] = {0, 3, 0, 200};
  check_case(case_prefill(2200u, FLAVOR_PLAIN, 2, M3IDX_DTYPE_BF16, 4, ctx, q));
}
END_TEST

/* Forced blocks (0,0), (1,2), (16,0), (0,16), (3,13) at the 16/17 edge. */
START_TEST(forced_blocks) {
  static const int fb[][2] = {{0, 0}, {1, 2}, {16, 0}, {0, 16}, {3, 13}, {0, 1}};
  static const int32_t lens[] = {2, 128, 129, 1920, 2048, 2049, 2176, 2177, 4000};
  for (int i = 0; i < 6; i++) {
    struct test_case *tc = case_decode(3000u + (unsigned)i, FLAVOR_PLAIN, 2, 2,
                                       M3IDX_DTYPE_BF16, 9, lens);
    case_set_forced(tc, fb[i][0], fb[i][1]);
    check_case(tc);
    static const int32_t ctx[] = {0, 1900, 2047};
    static const int32_t q[] = {2177, 200, 3};
    tc = case_prefill(3100u + (unsigned)i, FLAVOR_PLAIN, 1, M3IDX_DTYPE_E4M3, 3, ctx, q);
    case_set_forced(tc, fb[i][0], fb[i][1]);
    check_case(tc);
  }
}
END_TEST

/* e8m0 scales 0, 254, 255 (NaN); NaN, inf, subnormal and huge queries. */
START_TEST(special_values) {
  static const int32_t lens[] = {5, 130, 700, 2100};
  static const int32_t ctx[] = {0, 300};
  static const int32_t q[] = {260, 40};
  for (int dt = 1; dt <= 2; dt++)
    for (int k = 0; k < 3; k++) {
      check_case(case_decode(4000u + (unsigned)(dt * 10 + k), FLAVOR_SPECIAL, 4, 3,
                             (m3idx_dtype)dt, 4, lens));
      check_case(case_prefill(4100u + (unsigned)(dt * 10 + k), FLAVOR_SPECIAL, 2,
                              (m3idx_dtype)dt, 2, ctx, q));
    }
}
END_TEST

/* Few distinct values: block-score ties, broken by the smaller id. */
START_TEST(ties) {
  static const int32_t lens[] = {3000, 129, 2177};
  static const int32_t ctx[] = {1000};
  static const int32_t q[] = {300};
  for (int dt = 1; dt <= 2; dt++) {
    check_case(case_decode(5000u + (unsigned)dt, FLAVOR_TIES, 2, 2, (m3idx_dtype)dt, 3, lens));
    check_case(case_prefill(5100u + (unsigned)dt, FLAVOR_TIES, 1, (m3idx_dtype)dt, 1, ctx, q));
  }
}
END_TEST

/* Requests of one token, alone and in a batch. */
START_TEST(one_token) {
  static const int32_t one[] = {1};
  static const int32_t many[] = {1, 1, 1, 2};
  check_case(case_decode(6000u, FLAVOR_PLAIN, 1, 1, M3IDX_DTYPE_BF16, 1, one));
  check_case(case_decode(6001u, FLAVOR_PLAIN, 4, 1, M3IDX_DTYPE_E4M3, 4, many));
  static const int32_t ctx[] = {0};
  check_case(case_prefill(6002u, FLAVOR_PLAIN, 4, M3IDX_DTYPE_BF16, 1, ctx, one));
}
END_TEST

/* Long rows: more than 1024 blocks. */
START_TEST(long_rows) {
  static const int32_t lens[] = {131072 + 77};
  check_case(case_decode(7000u, FLAVOR_PLAIN, 1, 2, M3IDX_DTYPE_BF16, 1, lens));
  static const int32_t ctx[] = {131200};
  static const int32_t q[] = {2};
  check_case(case_prefill(7001u, FLAVOR_PLAIN, 2, M3IDX_DTYPE_E4M3, 1, ctx, q));
}
END_TEST

/* A batch of many requests of random lengths. */
START_TEST(random_batches) {
  uint64_t rs = 8000u + (uint64_t)_i;
  int nreq = 1 + (int)(case_rand(&rs) % 24), qlen = 1 + (int)(case_rand(&rs) % 4);
  int H = 1 + (int)(case_rand(&rs) % 4);
  int32_t lens[24], ctx[24], q[24];
  for (int r = 0; r < nreq; r++) {
    lens[r] = qlen + (int32_t)(case_rand(&rs) % 6000);
    ctx[r] = (int32_t)(case_rand(&rs) % 4000);
    q[r] = (int32_t)(case_rand(&rs) % 150);
  }
  m3idx_dtype dt = (m3idx_dtype)(1 + _i % 2);
  struct test_case *tc = case_decode(8100u + (uint64_t)_i, FLAVOR_PLAIN, H, qlen, dt, nreq, lens);
  case_set_forced(tc, (int)(case_rand(&rs) % 5), (int)(case_rand(&rs) % 5));
  check_case(tc);
  tc = case_prefill(8200u + (uint64_t)_i, FLAVOR_PLAIN, H, dt, nreq, ctx, q);
  case_set_forced(tc, (int)(case_rand(&rs) % 5), (int)(case_rand(&rs) % 5));
  check_case(tc);
}
END_TEST

static Suite *reference_suite(void) {
  Suite *s = suite_create("reference");
  TCase *t = tcase_create("oracle");
  tcase_set_timeout(t, 600);
  tcase_add_loop_test(t, decode_query_lens, 0, 4);
  tcase_add_test(t, prefill_context);
  tcase_add_test(t, prefill_empty_requests);
  tcase_add_test(t, forced_blocks);
  tcase_add_test(t, special_values);
  tcase_add_test(t, ties);
  tcase_add_test(t, one_token);
  tcase_add_test(t, long_rows);
  tcase_add_loop_test(t, random_batches, 0, 8);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(reference_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
