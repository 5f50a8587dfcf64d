/*
 * check-determinism.c - the same bytes for any thread count (1, 2, 7) and
 * for every page kernel this processor runs (scalar, fp64, avx512, vnni), and a
 * floating-point environment with flush-to-zero left as the caller had it
 * without changing a bit.
 *
 * SPDX-License-Identifier: MIT
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "patterns.h"
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

/* One (row, head) a request: the pages the one-row paths score, with
 * special query values (rows the pair path must leave to the fma path)
 * and plain ones (rows it takes). */
static struct test_case *one_row_decode(int flavor) {
  static const int32_t lens[] = {1000, 129, 20000, 1, 4097, 383};
  return case_decode(9002u + (unsigned)flavor, flavor, 1, 1, M3IDX_DTYPE_BF16, 6, lens);
}

/* One row a request, the query elements tiny, of random sign: even rows
 * of magnitudes 2^-100 .. 2^-89 (the pair path's, whose sums cancel down
 * to multiples of 2^-108 but never below 2^-126), odd rows subnormal and
 * tiny normal (2^-133 .. 2^-115: sums the pair path would flush, so the
 * fma path's). */
static struct test_case *tiny_query_decode(void) {
  static const int32_t lens[] = {3000, 129, 700, 1, 2000, 383, 128, 900};
  struct test_case *tc = case_decode(9004u, FLAVOR_PLAIN, 1, 1, M3IDX_DTYPE_BF16, 8, lens);
  uint16_t *q = tc->query_data;
  uint64_t rs = 9004u;
  for (int row = 0; row < 8; row++)
    for (int d = 0; d < 128; d++) {
      uint64_t r = case_rand(&rs);
      uint16_t e = row % 2 == 0 ? (uint16_t)(27 + r % 12) : (uint16_t)(r % 13);
      q[row * 128 + d] = (uint16_t)((r >> 8 & 0x807f) | e << 7);
    }
  return tc;
}

/* A CPU context for tc with M3IDX_CPU_ISA set to isa (left set); its
 * status (an error where the processor lacks the kernel). */
static m3idx_status isa_context(const struct test_case *tc, const char *isa,
                                m3idx_context **ctx) {
  setenv("M3IDX_CPU_ISA", isa, 1);
  m3idx_options o;
  case_options(tc, &o);
  o.backend = M3IDX_BACKEND_CPU;
  *ctx = NULL;
  return m3idx_context_create(&o, ctx);
}

/* tc's bytes from every kernel the processor runs equal the scalar
 * kernel's (a kernel the processor lacks is skipped). */
static void kernels_match_scalar(struct test_case *tc) {
  static const char *const kernels[] = {"fp64", "avx512", "vnni", "vnni-vbmi"};
  struct case_results scalar, simd;
  char why[512];
  setenv("M3IDX_CPU_ISA", "scalar", 1);
  run_cpu(tc, 2, &scalar);
  for (int k = 0; k < (int)(sizeof kernels / sizeof kernels[0]); k++) {
    m3idx_context *ctx;
    if (isa_context(tc, kernels[k], &ctx) != M3IDX_OK) {
      ck_assert_ptr_nonnull(strstr(m3idx_last_error(NULL), "M3IDX_CPU_ISA"));
      ck_assert_msg(k > 0, "the portable fp64 kernel is always there: %s", m3idx_last_error(NULL));
      continue;
    }
    ck_assert_msg(results_from_library(ctx, tc, &simd, why, sizeof why) == 0, "%s", why);
    ck_assert_msg(results_compare(tc, &scalar, &simd, why, sizeof why) == 0,
                  "seed %llu, scalar vs %s: %s", (unsigned long long)tc->seed, kernels[k], why);
    m3idx_context_destroy(ctx);
    results_free(&simd);
  }
  unsetenv("M3IDX_CPU_ISA");
  results_free(&scalar);
  case_free(tc);
}

/* Verification's verdicts, proofs and largest deviation are the same
 * bits whichever kernel computes the bound's terms (each kernel's terms
 * against the scalar rule's), on a near candidate: every score one ulp
 * off, the ids m3idx's. */
static void verify_kernels_match_scalar(struct test_case *tc, int finite_bounds) {
  static const char *const kernels[] = {"scalar", "fp64", "avx512", "vnni", "vnni-vbmi"};
  const int64_t pairs = (int64_t)tc->batch.num_heads * tc->batch.num_rows;
  const int64_t w = oracle_width(&tc->oc);
  float *scores = malloc(sizeof(float) * (size_t)(pairs * w));
  int32_t *ids = malloc(sizeof(int32_t) * 16 * (size_t)pairs);
  m3idx_verify_row *rows[2] = {malloc(sizeof **rows * (size_t)pairs),
                               malloc(sizeof **rows * (size_t)pairs)};
  m3idx_verify_summary sum[2];
  for (int k = 0; k < (int)(sizeof kernels / sizeof kernels[0]); k++) {
    m3idx_context *ctx;
    if (isa_context(tc, kernels[k], &ctx) != M3IDX_OK)
      continue; /* not on this processor */
    if (k == 0) {
      ck_assert_int_eq(m3idx_index_topk_decode(ctx, &tc->batch, &tc->query, &tc->kcache,
                                               tc->init_blocks, tc->local_blocks, NULL, 0, ids,
                                               scores, w), M3IDX_OK);
      ck_assert_int_eq(m3idx_score_decode(ctx, &tc->batch, &tc->query, &tc->kcache, NULL, 0,
                                          scores, w), M3IDX_OK);
      for (int64_t i = 0; i < pairs * w; i++)
        if (scores[i] == scores[i] && scores[i] > -1e30f && scores[i] < 1e30f)
          scores[i] = nextafterf(scores[i], i % 3 ? INFINITY : -INFINITY);
    }
    const int at = k == 0 ? 0 : 1;
    ck_assert_int_eq(m3idx_verify_topk(ctx, &tc->batch, &tc->query, &tc->kcache, tc->init_blocks,
                                       tc->local_blocks, ids, scores, w, NULL, rows[at], &sum[at]),
                     M3IDX_OK);
    if (at == 1) {
      ck_assert_msg(memcmp(&sum[1], &sum[0], sizeof sum[0]) == 0, "%s: the summary differs",
                    kernels[k]);
      ck_assert_msg(memcmp(rows[1], rows[0], sizeof **rows * (size_t)pairs) == 0,
                    "%s: a row's verdict differs", kernels[k]);
    } else if (finite_bounds)
      ck_assert(sum[0].max_score_deviation > 0.0); /* terms were needed */
    m3idx_context_destroy(ctx);
  }
  unsetenv("M3IDX_CPU_ISA");
  free(scores);
  free(ids);
  free(rows[0]);
  free(rows[1]);
  case_free(tc);
}

START_TEST(verify_kernels_agree) {
  verify_kernels_match_scalar(one_row_decode(FLAVOR_PLAIN), 1);
  verify_kernels_match_scalar(mixed_decode(), 0);
  verify_kernels_match_scalar(one_row_decode(FLAVOR_SPECIAL), 0);
}
END_TEST

START_TEST(kernels_agree) {
  kernels_match_scalar(mixed_decode());
  kernels_match_scalar(mixed_prefill());
  kernels_match_scalar(one_row_decode(FLAVOR_SPECIAL));
  kernels_match_scalar(one_row_decode(FLAVOR_PLAIN));
}
END_TEST

START_TEST(kernels_agree_tiny_queries) { kernels_match_scalar(tiny_query_decode()); }
END_TEST

static void to_kernels(struct test_case *tc, void *arg) {
  (void)arg;
  kernels_match_scalar(tc);
}

/* The patterns built to defeat the fast kernels (rows past the fp64
 * bound, keys a filter ranks wrongly, special values, tiny logits)
 * through every kernel, not only the one check-reference gets. */
START_TEST(kernels_agree_edge_patterns) {
  static const char *const names[] = {"filter_bound", "exact_rounding", "special_values",
                                      "tiny_scale", "cut_residuals", "mixed_pages"};
  int seen = 0;
  for (int p = 0; p < m3idx_npatterns; p++)
    for (size_t n = 0; n < sizeof names / sizeof names[0]; n++)
      if (strcmp(m3idx_patterns[p].name, names[n]) == 0) {
        seen++;
        for (int v = 0; v < m3idx_patterns[p].variants; v++)
          m3idx_patterns[p].make(v, to_kernels, NULL);
      }
  ck_assert_int_eq(seen, 6);
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
  tcase_add_test(t, verify_kernels_agree);
  tcase_add_test(t, kernels_agree_tiny_queries);
  tcase_add_test(t, kernels_agree_edge_patterns);
  tcase_add_test(t, caller_fp_environment);
  suite_add_tcase(s, t);
  return run_suite(s);
}
