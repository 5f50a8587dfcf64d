/*
 * check-soak.c - many contexts created and destroyed across threads, with
 * valid and invalid calls interleaved at random: every valid call gives the
 * bytes of a one-shot run, every invalid one fails and touches no output,
 * and (under ASan or valgrind in CI) nothing leaks.  Bounded in time:
 * M3IDX_SOAK_SECONDS (default 20).
 *
 * SPDX-License-Identifier: MIT
 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cases.h"
#include "suite-main.h"

#define THREADS 4
#define N_CASES 3

static struct test_case *cases[N_CASES];
/* The one-shot outputs of the fused call of each case. */
static int32_t *want_topk[N_CASES];
static float *want_scores[N_CASES];
static double deadline;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static size_t topk_count(const struct test_case *tc) {
  return (size_t)tc->batch.num_heads * (size_t)tc->batch.num_rows * M3IDX_TOPK;
}
static int32_t width_of(const struct test_case *tc) {
  return (tc->batch.max_seq_len + M3IDX_BLOCK_SIZE - 1) / M3IDX_BLOCK_SIZE;
}
static size_t score_count(const struct test_case *tc) {
  return (size_t)tc->batch.num_heads * (size_t)tc->batch.num_rows * (size_t)width_of(tc);
}

/* The fused call, with batch and kcache given (copies may be damaged). */
static m3idx_status fused(m3idx_context *ctx, const struct test_case *tc, const m3idx_batch *b,
                          const m3idx_query *q, const m3idx_kcache *k, int32_t init,
                          int32_t local, int32_t *topk, float *scores) {
  return b->mode == M3IDX_MODE_DECODE
             ? m3idx_index_topk_decode(ctx, b, q, k, init, local, NULL, 0, topk, scores,
                                       width_of(tc))
             : m3idx_index_topk_prefill(ctx, b, q, k, init, local, topk, scores, width_of(tc));
}

struct worker {
  uint64_t rng;
  int failed;
  long calls, refusals, contexts;
  char why[512];
};

#define FAIL_IF(cond, ...)                                     \
  do {                                                         \
    if (cond) {                                                \
      snprintf(w->why, sizeof w->why, __VA_ARGS__);            \
      w->failed = 1;                                           \
      return;                                                  \
    }                                                          \
  } while (0)

/* One invalid call: a damaged copy of the case's arguments. */
static void bad_call(struct worker *w, m3idx_context *ctx, const struct test_case *tc,
                     int32_t *topk, float *scores) {
  m3idx_batch b = tc->batch;
  m3idx_query q = tc->query;
  m3idx_kcache k = tc->kcache;
  int32_t init = tc->init_blocks, local = tc->local_blocks;
  int32_t *lens = malloc((size_t)b.num_reqs * sizeof *lens);
  int32_t *table = malloc((size_t)b.num_reqs * (size_t)k.bt_stride * sizeof *table);
  memcpy(lens, b.seq_lens, (size_t)b.num_reqs * sizeof *lens);
  memcpy(table, k.block_table, (size_t)b.num_reqs * (size_t)k.bt_stride * sizeof *table);
  b.seq_lens = lens;
  k.block_table = table;
  int what = (int)(case_rand(&w->rng) % 7);
  switch (what) {
  case 0: lens[case_rand(&w->rng) % (uint64_t)b.num_reqs] = -5; break;
  case 1: table[0] = k.num_pages; break;           /* block 0 is causal for every request */
  case 2: init = 9; local = 8; break;
  case 3: q.scale = NAN; break;
  case 4: b.num_reqs += 1000; break;               /* past the context's limit */
  case 5: b.num_heads = 0; break;
  case 6: k.pages = NULL; break;
  }
  size_t nt = topk_count(tc), ns = score_count(tc);
  memset(topk, 0xa5, nt * sizeof *topk);
  memset(scores, 0xa5, ns * sizeof *scores);
  m3idx_status st = fused(ctx, tc, &b, &q, &k, init, local, topk, scores);
  free(lens);
  free(table);
  FAIL_IF(st == M3IDX_OK, "damage %d was accepted (seed %llu)", what,
          (unsigned long long)tc->seed);
  FAIL_IF(m3idx_last_error(ctx)[0] == '\0', "damage %d: no message", what);
  for (size_t i = 0; i < nt; i++)
    FAIL_IF(topk[i] != (int32_t)0xa5a5a5a5, "damage %d wrote topk[%zu]", what, i);
  const unsigned char *sb = (const unsigned char *)scores;
  for (size_t i = 0; i < ns * sizeof *scores; i++)
    FAIL_IF(sb[i] != 0xa5, "damage %d wrote score byte %zu", what, i);
  w->refusals++;
}

static void good_call(struct worker *w, m3idx_context *ctx, int c, int32_t *topk,
                      float *scores) {
  const struct test_case *tc = cases[c];
  memset(scores, 0xa5, score_count(tc) * sizeof *scores); /* as the one-shot run's */
  m3idx_status st = fused(ctx, tc, &tc->batch, &tc->query, &tc->kcache, tc->init_blocks,
                          tc->local_blocks, topk, scores);
  FAIL_IF(st != M3IDX_OK, "case %d: %s", c, m3idx_last_error(ctx));
  FAIL_IF(memcmp(topk, want_topk[c], topk_count(tc) * sizeof *topk) != 0,
          "case %d: top-k differs from the one-shot run", c);
  FAIL_IF(memcmp(scores, want_scores[c], score_count(tc) * sizeof *scores) != 0,
          "case %d: scores differ from the one-shot run", c);
  w->calls++;
}

static void soak(struct worker *w) {
  size_t nt = 0, ns = 0;
  for (int c = 0; c < N_CASES; c++) {
    nt = topk_count(cases[c]) > nt ? topk_count(cases[c]) : nt;
    ns = score_count(cases[c]) > ns ? score_count(cases[c]) : ns;
  }
  int32_t *topk = malloc(nt * sizeof *topk);
  float *scores = malloc(ns * sizeof *scores);
  while (!w->failed && now() < deadline) {
    m3idx_options o;
    m3idx_context *ctx = NULL;
    case_options(cases[0], &o);
    for (int c = 1; c < N_CASES; c++) {
      const m3idx_batch *b = &cases[c]->batch;
      o.max_reqs = b->num_reqs > o.max_reqs ? b->num_reqs : o.max_reqs;
      o.max_model_len = b->max_seq_len > o.max_model_len ? b->max_seq_len : o.max_model_len;
      o.max_rows = b->num_rows > o.max_rows ? b->num_rows : o.max_rows;
      o.max_heads = b->num_heads > o.max_heads ? b->num_heads : o.max_heads;
    }
    o.backend = M3IDX_BACKEND_CPU;
    o.threads = 1 + (int32_t)(case_rand(&w->rng) % 3);
    o.max_model_len += (int32_t)(case_rand(&w->rng) % 4096);
    if (case_rand(&w->rng) % 8 == 0) {
      /* Bad options: no context, a message, nothing else. */
      o.threads = case_rand(&w->rng) % 2 ? -1 : M3IDX_MAX_THREADS + 1;
      if (m3idx_context_create(&o, &ctx) == M3IDX_OK || ctx != NULL) {
        snprintf(w->why, sizeof w->why, "threads %d was accepted", (int)o.threads);
        w->failed = 1;
      }
      continue;
    }
    if (m3idx_context_create(&o, &ctx) != M3IDX_OK) {
      snprintf(w->why, sizeof w->why, "context: %s", m3idx_last_error(NULL));
      w->failed = 1;
      break;
    }
    w->contexts++;
    int n = 1 + (int)(case_rand(&w->rng) % 6);
    for (int i = 0; i < n && !w->failed; i++) {
      int c = (int)(case_rand(&w->rng) % N_CASES);
      if (case_rand(&w->rng) % 2)
        bad_call(w, ctx, cases[c], topk, scores);
      else
        good_call(w, ctx, c, topk, scores);
    }
    m3idx_context_destroy(ctx);
  }
  free(topk);
  free(scores);
}

static void *run(void *arg) {
  soak(arg);
  return NULL;
}

START_TEST(soak_contexts_and_calls) {
  static const int32_t lens[] = {3000, 129, 9000, 7};
  static const int32_t lens2[] = {600, 5000};
  static const int32_t ctx_lens[] = {0, 2000};
  static const int32_t q_lens[] = {70, 33};
  cases[0] = case_decode(15000u, FLAVOR_PLAIN, 2, 1, M3IDX_DTYPE_BF16, 4, lens);
  cases[1] = case_decode(15001u, FLAVOR_SPECIAL, 1, 2, M3IDX_DTYPE_E4M3, 2, lens2);
  cases[2] = case_prefill(15002u, FLAVOR_TIES, 2, M3IDX_DTYPE_BF16, 2, ctx_lens, q_lens);
  for (int c = 0; c < N_CASES; c++) {
    m3idx_options o;
    m3idx_context *ctx = NULL;
    case_options(cases[c], &o);
    o.backend = M3IDX_BACKEND_CPU;
    ck_assert_int_eq(m3idx_context_create(&o, &ctx), M3IDX_OK);
    want_topk[c] = malloc(topk_count(cases[c]) * sizeof(int32_t));
    want_scores[c] = malloc(score_count(cases[c]) * sizeof(float));
    memset(want_scores[c], 0xa5, score_count(cases[c]) * sizeof(float)); /* non-causal: untouched */
    ck_assert_int_eq(fused(ctx, cases[c], &cases[c]->batch, &cases[c]->query, &cases[c]->kcache,
                           cases[c]->init_blocks, cases[c]->local_blocks, want_topk[c],
                           want_scores[c]),
                     M3IDX_OK);
    m3idx_context_destroy(ctx);
  }
  const char *env = getenv("M3IDX_SOAK_SECONDS");
  double seconds = env && atof(env) > 0 ? atof(env) : 20.0;
  deadline = now() + seconds;
  pthread_t tid[THREADS];
  struct worker w[THREADS];
  memset(w, 0, sizeof w);
  for (int t = 0; t < THREADS; t++) {
    w[t].rng = 0x9e3779b97f4a7c15ull * (uint64_t)(t + 1);
    ck_assert_int_eq(pthread_create(&tid[t], NULL, run, &w[t]), 0);
  }
  long calls = 0, refusals = 0, contexts = 0;
  for (int t = 0; t < THREADS; t++) {
    pthread_join(tid[t], NULL);
    calls += w[t].calls;
    refusals += w[t].refusals;
    contexts += w[t].contexts;
  }
  for (int t = 0; t < THREADS; t++)
    ck_assert_msg(!w[t].failed, "thread %d: %s", t, w[t].why);
  printf("soak: %.0f s, %ld contexts, %ld valid calls, %ld refused\n", seconds, contexts, calls,
         refusals);
  ck_assert_int_gt(calls, 0);
  ck_assert_int_gt(refusals, 0);
  for (int c = 0; c < N_CASES; c++) {
    free(want_topk[c]);
    free(want_scores[c]);
    case_free(cases[c]);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("soak");
  TCase *t = tcase_create("soak");
  tcase_set_timeout(t, 900);
  tcase_add_test(t, soak_contexts_and_calls);
  suite_add_tcase(s, t);
  return run_suite(s);
}
