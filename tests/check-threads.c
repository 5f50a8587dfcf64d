/*
 * check-threads.c - one context per thread is safe: several threads, each
 * with its own context, run the same calls at the same time and get the
 * bytes a serial run gets.
 *
 * SPDX-License-Identifier: MIT
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "results.h"
#include "suite-main.h"

#define THREADS 4
#define ROUNDS 3

static struct test_case *cases[2];
static struct case_results serial[2];

struct worker {
  int failed;
  char why[512];
};

static void *work(void *arg) {
  struct worker *w = arg;
  for (int round = 0; round < ROUNDS && !w->failed; round++)
    for (int i = 0; i < 2 && !w->failed; i++) {
      m3idx_options o;
      m3idx_context *ctx = NULL;
      case_options(cases[i], &o);
      o.threads = 1 + round; /* thread counts differ too: still the same bytes */
      if (m3idx_context_create(&o, &ctx) != M3IDX_OK) {
        snprintf(w->why, sizeof w->why, "context: %s", m3idx_last_error(NULL));
        w->failed = 1;
        break;
      }
      struct case_results mine;
      if (results_from_library(ctx, cases[i], &mine, w->why, sizeof w->why) != 0 ||
          results_compare(cases[i], &mine, &serial[i], w->why, sizeof w->why) != 0)
        w->failed = 1;
      else
        results_free(&mine);
      m3idx_context_destroy(ctx);
    }
  return NULL;
}

START_TEST(concurrent_contexts) {
  static const int32_t lens[] = {3000, 129, 20000, 7, 2049};
  static const int32_t ctx_lens[] = {0, 4000, 129};
  static const int32_t q[] = {200, 33, 129};
  cases[0] = case_decode(14000u, FLAVOR_SPECIAL, 2, 2, M3IDX_DTYPE_BF16, 5, lens);
  cases[1] = case_prefill(14001u, FLAVOR_PLAIN, 3, M3IDX_DTYPE_E4M3, 3, ctx_lens, q);
  for (int i = 0; i < 2; i++) {
    m3idx_options o;
    m3idx_context *ctx = NULL;
    char why[512];
    case_options(cases[i], &o);
    ck_assert_int_eq(m3idx_context_create(&o, &ctx), M3IDX_OK);
    ck_assert_msg(results_from_library(ctx, cases[i], &serial[i], why, sizeof why) == 0, "%s", why);
    m3idx_context_destroy(ctx);
  }
  pthread_t tid[THREADS];
  struct worker w[THREADS] = {{0}};
  for (int t = 0; t < THREADS; t++)
    ck_assert_int_eq(pthread_create(&tid[t], NULL, work, &w[t]), 0);
  for (int t = 0; t < THREADS; t++)
    pthread_join(tid[t], NULL);
  for (int t = 0; t < THREADS; t++)
    ck_assert_msg(!w[t].failed, "thread %d: %s", t, w[t].why);
  for (int i = 0; i < 2; i++) {
    results_free(&serial[i]);
    case_free(cases[i]);
  }
}
END_TEST

/* Messages are per context, and per thread for calls without one. */
static void *bad_call(void *arg) {
  int32_t *cap = arg;
  m3idx_work_map_capacity(0, 1, 1, 1, cap); /* fails: max_reqs */
  return (void *)m3idx_last_error(NULL);
}

START_TEST(thread_local_messages) {
  int32_t cap;
  ck_assert_int_eq(m3idx_work_map_capacity(1, 1, 0, 1, &cap), M3IDX_ERR_INVALID_SIZE);
  pthread_t t;
  void *other = NULL;
  ck_assert_int_eq(pthread_create(&t, NULL, bad_call, &cap), 0);
  pthread_join(t, &other);
  ck_assert_ptr_nonnull(strstr(m3idx_last_error(NULL), "query_len"));
  ck_assert_ptr_nonnull(strstr((const char *)other, "max_reqs"));
}
END_TEST

int main(void) {
  Suite *s = suite_create("threads");
  TCase *t = tcase_create("threads");
  tcase_set_timeout(t, 600);
  tcase_add_test(t, concurrent_contexts);
  tcase_add_test(t, thread_local_messages);
  suite_add_tcase(s, t);
  return run_suite(s);
}
