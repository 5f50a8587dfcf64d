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

#include "patterns.h"
#include "results.h"
#include "suite-main.h"

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

static void oracle_sink(struct test_case *tc, void *arg) {
  (void)arg;
  check_case(tc);
}

START_TEST(pattern_against_oracle) { patterns_run(_i, 0, oracle_sink, NULL); }
END_TEST

static Suite *reference_suite(void) {
  Suite *s = suite_create("reference");
  TCase *t = tcase_create("oracle");
  tcase_set_timeout(t, 600);
  tcase_add_loop_test(t, pattern_against_oracle, 0, patterns_total());
  suite_add_tcase(s, t);
  return s;
}

int main(void) { return run_suite(reference_suite()); }
