/*
 * check-determinism.c - the same bytes for any thread count (1, 2, 7) and
 * for every page kernel this processor runs (scalar, avx512), and a
 * floating-point environment with flush-to-zero left as the caller had it
 * without changing a bit.
 *
 * SPDX-License-Identifier: MIT
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "results.h"
#include "suite-main.h"

static struct test_case *mixed_decode(void) {
  static const int32_t lens[] = {4000, 129, 20000, 2, 2049, 70000};
  return case_decode(9000u, FLAVOR_SPECIAL, 3, 2, M3IDX_DTYPE_BF16, 6, lens);
}

static struct test_case *mixed_prefill(void) {
  static const int32_t ctx[] = {0, 5000, 129};
  static const int32_t q[] = {300, 77, 256};
  return case_prefill(9001u, FLAVOR_PLAIN, 2, M3IDX_DTYPE_E4M3, 3, ctx, q);
}

/* Results on a CPU context with the given thread count. */
static void run_cpu(struct test_case *tc, int threads, struct case_results *out) {
  m3idx_options o;
  m3idx_context *ctx = NULL;
  char why[512];
  case_options(tc, &o);
  o.backend = M3IDX_BACKEND_CPU;
  o.threads = threads;
  ck_assert_msg(m3idx_context_create(&o, &ctx) == M3IDX_OK, "%s", m3idx_last_error(NULL));
  ck_assert_msg(results_from_library(ctx, tc, out, why, sizeof why) == 0, "%s", why);
  m3idx_context_destroy(ctx);
}

static void same_for_thread_counts(struct test_case *tc) {
  struct case_results one, other;
  char why[512];
  run_cpu(tc, 1, &one);
  static const int counts[] = {2, 7};
  for (int i = 0; i < 2; i++) {
    run_cpu(tc, counts[i], &other);
    ck_assert_msg(results_compare(tc, &one, &other, why, sizeof why) == 0,
                  "1 vs %d threads: %s", counts[i], why);
    results_free(&other);
  }
  results_free(&one);
  case_free(tc);
}

START_TEST(thread_counts_decode) { same_for_thread_counts(mixed_decode()); }
END_TEST

START_TEST(thread_counts_prefill) { same_for_thread_counts(mixed_prefill()); }
END_TEST

/* Every kernel the processor runs gives the scalar kernel's bytes. */
START_TEST(kernels_agree) {
  struct test_case *cases[2] = {mixed_decode(), mixed_prefill()};
  for (int i = 0; i < 2; i++) {
    struct case_results scalar, simd;
    char why[512];
    setenv("M3IDX_CPU_ISA", "scalar", 1);
    run_cpu(cases[i], 2, &scalar);
    setenv("M3IDX_CPU_ISA", "avx512", 1);
    m3idx_options o;
    m3idx_context *ctx = NULL;
    case_options(cases[i], &o);
    o.backend = M3IDX_BACKEND_CPU;
    if (m3idx_context_create(&o, &ctx) != M3IDX_OK) {
      /* This processor has no AVX-512: nothing else to compare. */
      ck_assert_ptr_nonnull(strstr(m3idx_last_error(NULL), "M3IDX_CPU_ISA"));
      results_free(&scalar);
      continue;
    }
    ck_assert_msg(results_from_library(ctx, cases[i], &simd, why, sizeof why) == 0, "%s", why);
    ck_assert_msg(results_compare(cases[i], &scalar, &simd, why, sizeof why) == 0,
                  "scalar vs avx512: %s", why);
    m3idx_context_destroy(ctx);
    results_free(&scalar);
    results_free(&simd);
  }
  unsetenv("M3IDX_CPU_ISA");
  case_free(cases[0]);
  case_free(cases[1]);
}
END_TEST

/* A caller running with FTZ/DAZ and round-toward-zero gets the same bytes,
 * and gets its own environment back. */
START_TEST(caller_fp_environment) {
#if defined(__x86_64__)
  struct test_case *tc = mixed_decode();
  struct case_results plain, odd;
  char why[512];
  run_cpu(tc, 2, &plain);
  unsigned saved = _mm_getcsr();
  unsigned odd_csr = saved | 0x8040u | 0x6000u; /* FTZ, DAZ, round toward zero */
  _mm_setcsr(odd_csr);
  run_cpu(tc, 1, &odd);
  unsigned after = _mm_getcsr();
  _mm_setcsr(saved);
  ck_assert_uint_eq(after & ~0x3fu, odd_csr & ~0x3fu); /* restored, but for sticky flags */
  ck_assert_msg(results_compare(tc, &plain, &odd, why, sizeof why) == 0,
                "caller with FTZ/DAZ/round-to-zero: %s", why);
  results_free(&plain);
  results_free(&odd);
  case_free(tc);
#endif
}
END_TEST

int main(void) {
  Suite *s = suite_create("determinism");
  TCase *t = tcase_create("determinism");
  tcase_set_timeout(t, 600);
  tcase_add_test(t, thread_counts_decode);
  tcase_add_test(t, thread_counts_prefill);
  tcase_add_test(t, kernels_agree);
  tcase_add_test(t, caller_fp_environment);
  suite_add_tcase(s, t);
  return run_suite(s);
}
