/*
 * cmd-default.c - `m3idx' with no arguments: a seeded synthetic decode and
 * prefill batch on every available backend; the top-k of a few rows, the
 * time of each stage, and whether the backends (and thread counts) agree.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cli.h"
#include "synth.h"

#define SEED 20261202u
#define REQS 8
#define HEADS 4
#define CHUNK 128
#define REPEAT 3

struct run {
  const char *label;
  m3idx_context *ctx;
  int32_t *dec_topk, *pre_topk;
  float *dec_scores, *pre_scores;
  double t[2][4];  /* [decode, prefill][score, pin, topk, fused] */
  int noisy[2][4]; /* the repeats spread too widely for t to be a figure */
};

static const char *stage_names[4] = {"score", "pin", "top-k", "fused"};

/* One stage of one mode; returns its status, or its median time in *t. */
static m3idx_status stage(struct run *r, const struct synth *s, int prefill, int which,
                          float *scores, double *t, int *noisy) {
  m3idx_batch b;
  m3idx_kcache k;
  m3idx_query q = {prefill ? s->prefill_query : s->decode_query, M3IDX_DTYPE_BF16, 0.08838835f};
  if (prefill)
    synth_prefill_batch(s, &b);
  else
    synth_decode_batch(s, &b);
  synth_kcache(s, &k);
  int32_t *topk = prefill ? r->pre_topk : r->dec_topk;
  int64_t w = synth_blocks_of(b.max_seq_len);
  double times[REPEAT + 1];
  for (int i = 0; i <= REPEAT; i++) {
    double t0 = cli_now();
    m3idx_status st = M3IDX_OK;
    switch (which) {
    case 0:
      st = prefill ? m3idx_score_prefill(r->ctx, &b, &q, &k, scores, w)
                   : m3idx_score_decode(r->ctx, &b, &q, &k, NULL, 0, scores, w);
      break;
    case 1:
      st = m3idx_pin_forced_blocks(r->ctx, &b, 0, 1, scores, w);
      break;
    case 2:
      st = m3idx_topk_from_scores(r->ctx, &b, scores, w, topk);
      break;
    case 3:
      st = prefill ? m3idx_index_topk_prefill(r->ctx, &b, &q, &k, 0, 1, topk, scores, w)
                   : m3idx_index_topk_decode(r->ctx, &b, &q, &k, 0, 1, NULL, 0, topk, scores, w);
      break;
    }
    if (st == M3IDX_OK)
      st = m3idx_synchronize(r->ctx);
    if (st != M3IDX_OK)
      return st;
    times[i] = cli_now() - t0;
  }
  *t = cli_median(times + 1, REPEAT); /* times[0] is the warm-up; sorts the rest */
  *noisy = cli_unsteady(times + 1, REPEAT);
  return M3IDX_OK;
}

static int run_backend(struct run *r, const struct synth *s, m3idx_backend backend, int threads) {
  m3idx_options o;
  m3idx_options_init(&o);
  o.backend = backend;
  o.threads = threads;
  o.max_reqs = REQS;
  o.max_model_len = s->max_seq_len;
  o.max_rows = s->prefill_rows;
  o.max_heads = HEADS;
  o.flags = M3IDX_FLAG_HOST_POINTERS;
  m3idx_status st = m3idx_context_create(&o, &r->ctx);
  if (st != M3IDX_OK) {
    cli_library_error(NULL, st, m3idx_last_error(NULL));
    return -1;
  }
  int64_t w = synth_blocks_of(s->max_seq_len);
  r->dec_topk = malloc(sizeof(int32_t) * HEADS * REQS * M3IDX_TOPK);
  r->pre_topk = malloc(sizeof(int32_t) * HEADS * (size_t)s->prefill_rows * M3IDX_TOPK);
  r->dec_scores = calloc((size_t)(HEADS * REQS * w), sizeof(float));
  r->pre_scores = calloc((size_t)(HEADS * s->prefill_rows * w), sizeof(float));
  if (!r->dec_topk || !r->pre_topk || !r->dec_scores || !r->pre_scores)
    return -1;
  for (int prefill = 0; prefill <= 1; prefill++)
    for (int which = 0; which < 4; which++) {
      cli_progress("%s: %s %s", r->label, prefill ? "prefill" : "decode", stage_names[which]);
      st = stage(r, s, prefill, which, prefill ? r->pre_scores : r->dec_scores,
                 &r->t[prefill][which], &r->noisy[prefill][which]);
      if (st != M3IDX_OK) {
        cli_library_error(NULL, st, m3idx_last_error(r->ctx));
        return -1;
      }
    }
  return 0;
}

static void free_run(struct run *r) {
  m3idx_context_destroy(r->ctx);
  free(r->dec_topk);
  free(r->pre_topk);
  free(r->dec_scores);
  free(r->pre_scores);
}

/* Byte equality of the fused outputs: every top-k slot, every causal score. */
static int same_bytes(const struct run *a, const struct run *b, const struct synth *s) {
  int64_t w = synth_blocks_of(s->max_seq_len);
  if (memcmp(a->dec_topk, b->dec_topk, sizeof(int32_t) * HEADS * REQS * M3IDX_TOPK) ||
      memcmp(a->pre_topk, b->pre_topk, sizeof(int32_t) * HEADS * (size_t)s->prefill_rows * M3IDX_TOPK))
    return 0;
  for (int h = 0; h < HEADS; h++) {
    for (int r = 0; r < REQS; r++) {
      int64_t off = ((int64_t)h * REQS + r) * w, n = (s->seq_lens[r] - 1) / 128 + 1;
      if (memcmp(a->dec_scores + off, b->dec_scores + off, sizeof(float) * (size_t)n))
        return 0;
    }
    for (int r = 0; r < REQS; r++)
      for (int i = s->cu_seqlens_q[r]; i < s->cu_seqlens_q[r + 1]; i++) {
        int64_t off = ((int64_t)h * s->prefill_rows + i) * w;
        int64_t n = (s->context_lens[r] + (i - s->cu_seqlens_q[r])) / 128 + 1;
        if (memcmp(a->pre_scores + off, b->pre_scores + off, sizeof(float) * (size_t)n))
          return 0;
      }
  }
  return 1;
}

static void print_topk(const char *what, const int32_t *ids) {
  printf("  %-41s", what);
  for (int i = 0; i < M3IDX_TOPK; i++)
    printf(" %d", ids[i]);
  printf("\n");
}

int cli_default_job(int argc, char **argv) {
  (void)argc;
  (void)argv;
  double start = cli_now();
  int32_t lens[REQS];
  uint64_t rs = SEED;
  for (int r = 0; r < REQS; r++) /* up to 32K tokens, one request exactly 32K */
    lens[r] = r == 0 ? 32768 : 1 + (int32_t)(synth_rand(&rs) % 32768);
  struct synth s;
  cli_progress("building the synthetic batch");
  const struct synth_spec spec = {.style = SYNTH_MODEL_LIKE, .seed = SEED, .num_reqs = REQS,
                                  .seq_lens = lens, .num_heads = HEADS, .query_len = 1,
                                  .prefill_chunk = CHUNK};
  if (synth_make(&s, &spec) != 0) {
    cli_error(NULL, "no memory for the synthetic batch");
    return CLI_EXIT_FAILURE;
  }
  int64_t tokens = 0;
  for (int r = 0; r < REQS; r++)
    tokens += lens[r];
  printf("m3idx %s default job (seed %u)\n", m3idx_version(), SEED);
  printf("batch: %d requests, %lld tokens (longest %d), %d index heads, bf16 queries, scale 1/sqrt(128)\n",
         REQS, (long long)tokens, (int)s.max_seq_len, HEADS);
  printf("       decode: 1 row per request; prefill: the last %d tokens of each request after its context\n",
         CHUNK);
  printf("       forced blocks: init 0, local 1 (the model's setting)\n");

  struct run runs[3];
  int nruns = 0, failed = 0;
  memset(runs, 0, sizeof runs);
  const char *hip_why = m3idx_backend_unavailable_reason(M3IDX_BACKEND_HIP);
#ifdef _OPENMP
  const int threads = omp_get_max_threads();
#else
  const int threads = 1;
#endif
  char cpu_label[32];
  snprintf(cpu_label, sizeof cpu_label, "cpu, %d thread%s", threads, threads == 1 ? "" : "s");
  runs[nruns].label = cpu_label;
  failed |= run_backend(&runs[nruns++], &s, M3IDX_BACKEND_CPU, 0) != 0;
  runs[nruns].label = "cpu, 1 thread";
  failed |= run_backend(&runs[nruns++], &s, M3IDX_BACKEND_CPU, 1) != 0;
  if (hip_why == NULL && !failed) {
    runs[nruns].label = "hip";
    failed |= run_backend(&runs[nruns++], &s, M3IDX_BACKEND_HIP, 0) != 0;
  }
  cli_progress_done();
  if (failed) {
    for (int i = 0; i < nruns; i++)
      free_run(&runs[i]);
    synth_free(&s);
    return CLI_EXIT_FAILURE;
  }
  printf("backends: cpu%s\n", hip_why ? "" : ", hip (host pointers: times include transfers)");
  if (hip_why)
    printf("          hip unavailable: %s\n", hip_why);

  printf("\ntop-k block ids (fused call, head 0 unless noted; rows counted within their request;\n"
         "the first id is the row's own block, pinned as the local block):\n");
  char what[96];
  for (int r = 0; r < REQS; r += 3) {
    snprintf(what, sizeof what, "decode req %d row 0 (pos %d):", r, lens[r] - 1);
    print_topk(what, runs[0].dec_topk + (size_t)r * M3IDX_TOPK);
  }
  {
    int last = s.cu_seqlens_q[1] - 1; /* request 0's last row */
    snprintf(what, sizeof what, "prefill req 0 row %d (pos %d):", last, s.context_lens[0] + last);
    print_topk(what, runs[0].pre_topk + (size_t)last * M3IDX_TOPK);
    int row = s.cu_seqlens_q[7]; /* request 7's first row */
    snprintf(what, sizeof what, "prefill req 7 row 0 (pos %d), head 3:", s.context_lens[7]);
    print_topk(what, runs[0].pre_topk + ((size_t)3 * s.prefill_rows + (size_t)row) * M3IDX_TOPK);
  }

  printf("\ntime per stage (median of %d, ms; * the runs spread by more than %d%%: the machine\n"
         "was busy, and the figure is not one to quote):\n", REPEAT, CLI_UNSTEADY_PERCENT);
  printf("  %-16s %8s  %8s  %8s  %8s    %8s  %8s  %8s  %8s\n", "backend", "dec:scr", "pin", "top-k",
         "fused", "pre:scr", "pin", "top-k", "fused");
  for (int i = 0; i < nruns; i++) {
    printf("  %-16s", runs[i].label);
    for (int m = 0; m < 2; m++) {
      for (int k = 0; k < 4; k++)
        printf(" %8.3f%c", 1e3 * runs[i].t[m][k], runs[i].noisy[m][k] ? '*' : ' ');
      printf("  ");
    }
    printf("\n");
  }
  int agree = 1;
  for (int i = 1; i < nruns; i++)
    agree &= same_bytes(&runs[0], &runs[i], &s);
  printf("\nthreads agree (cpu, %d threads vs 1 thread): %s\n", threads,
         same_bytes(&runs[0], &runs[1], &s) ? "yes" : "no");
  printf("backends agree: %s%s\n", agree ? "yes" : "no",
         nruns > 2 ? " (cpu and hip, every top-k id and causal score byte)"
                   : " (only the cpu backend is available)");
  printf("total time: %.2f s\n", cli_now() - start);
  for (int i = 0; i < nruns; i++)
    free_run(&runs[i]);
  synth_free(&s);
  return agree ? 0 : CLI_EXIT_FAILURE;
}
