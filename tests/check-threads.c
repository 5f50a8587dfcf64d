/*
 * check-threads.c - one context per thread is safe: several threads, each
 * with its own context, run the same calls at the same time and get the
 * bytes a serial run gets.  The worker count is bounded, a machine that
 * cannot start the workers gets an error rather than an exit, and a child
 * forked after the workers started still computes.
 *
 * SPDX-License-Identifier: MIT
 */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

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

START_TEST(thread_count_bounded) {
  static const int32_t bad[] = {M3IDX_MAX_THREADS + 1, 50000, 100000, INT32_MAX};
  m3idx_options o;
  m3idx_context *ctx = NULL;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    m3idx_options_init(&o);
    o.backend = M3IDX_BACKEND_CPU;
    o.threads = bad[i];
    ck_assert_int_eq(m3idx_context_create(&o, &ctx), M3IDX_ERR_INVALID_SIZE);
    ck_assert_ptr_nonnull(strstr(m3idx_last_error(NULL), "opts->threads"));
    ck_assert_ptr_null(ctx);
  }
}
END_TEST

/* Address space for the process as it is plus `extra' bytes. */
static rlim_t address_space_now_plus(size_t extra) {
  unsigned long pages = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f == NULL || fscanf(f, "%lu", &pages) != 1)
    pages = 0;
  if (f)
    fclose(f);
  return pages ? (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + extra : 0;
}

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

/* With too little address space for 64 workers' stacks, libgomp used to
 * print "Thread creation failed" and exit(1) its host process. */
START_TEST(workers_that_cannot_start) {
#ifdef UNDER_ASAN
  return; /* ASan reserves terabytes of address space: no limit can be set */
#endif
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    alarm(60);
    struct rlimit lim = {address_space_now_plus((size_t)96 << 20), RLIM_INFINITY};
    lim.rlim_max = lim.rlim_cur;
    if (lim.rlim_cur == 0 || setrlimit(RLIMIT_AS, &lim) != 0)
      _exit(3);
    m3idx_options o;
    m3idx_context *ctx = NULL;
    m3idx_options_init(&o);
    o.backend = M3IDX_BACKEND_CPU;
    o.max_reqs = o.max_rows = o.max_heads = 1;
    o.max_model_len = 128;
    o.threads = 64;
    m3idx_status st = m3idx_context_create(&o, &ctx);
    if (st == M3IDX_OK) {
      m3idx_context_destroy(ctx);
      _exit(4); /* 64 x 8 MiB of stacks in 96 MiB: the probe should fail */
    }
    _exit(st == M3IDX_ERR_NO_MEMORY && strstr(m3idx_last_error(NULL), "worker threads") ? 0 : 5);
  }
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status), "the child died of signal %d", WTERMSIG(status));
  ck_assert_msg(WEXITSTATUS(status) != 4, "64 workers started in 96 MiB: the test needs a smaller limit");
  ck_assert_msg(WEXITSTATUS(status) == 0,
                "the child exited %d (1: libgomp ended it; 5: not M3IDX_ERR_NO_MEMORY)",
                WEXITSTATUS(status));
}
END_TEST

/* libgomp's workers do not survive fork(): a child of a process whose
 * context started them must still get the serial bytes, on one thread. */
START_TEST(forked_child_computes) {
  static const int32_t lens[] = {3000, 129, 2049};
  struct test_case *tc = case_decode(14002u, FLAVOR_PLAIN, 2, 1, M3IDX_DTYPE_BF16, 3, lens);
  m3idx_options o;
  m3idx_context *ctx = NULL;
  char why[512];
  struct case_results before;
  case_options(tc, &o);
  o.backend = M3IDX_BACKEND_CPU;
  o.threads = 2;
  ck_assert_int_eq(m3idx_context_create(&o, &ctx), M3IDX_OK);
  ck_assert_msg(results_from_library(ctx, tc, &before, why, sizeof why) == 0, "%s", why);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    alarm(60); /* it hung here before */
    struct case_results mine;
    int bad = results_from_library(ctx, tc, &mine, why, sizeof why) != 0 ||
              results_compare(tc, &mine, &before, why, sizeof why) != 0;
    m3idx_context *fresh = NULL;
    bad = bad || m3idx_context_create(&o, &fresh) != M3IDX_OK ||
          results_from_library(fresh, tc, &mine, why, sizeof why) != 0 ||
          results_compare(tc, &mine, &before, why, sizeof why) != 0;
    if (bad)
      fprintf(stderr, "forked child: %s\n", why);
    _exit(bad);
  }
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(!WIFSIGNALED(status), "the forked child hung or died (signal %d)",
                WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the forked child's bytes differ");
  /* The parent keeps its workers. */
  struct case_results after;
  ck_assert_msg(results_from_library(ctx, tc, &after, why, sizeof why) == 0, "%s", why);
  ck_assert_msg(results_compare(tc, &after, &before, why, sizeof why) == 0, "%s", why);
  results_free(&after);
  results_free(&before);
  m3idx_context_destroy(ctx);
  case_free(tc);
}
END_TEST

int main(void) {
  Suite *s = suite_create("threads");
  TCase *t = tcase_create("threads");
  tcase_set_timeout(t, 600);
  tcase_add_test(t, concurrent_contexts);
  tcase_add_test(t, thread_local_messages);
  tcase_add_test(t, thread_count_bounded);
  tcase_add_test(t, workers_that_cannot_start);
  tcase_add_test(t, forked_child_computes);
  suite_add_tcase(s, t);
  return run_suite(s);
}
