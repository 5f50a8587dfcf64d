/*
 * engine-cpu.c - the bench's CPU engine: the public API on host memory,
 * each call timed on the host clock.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"

struct cpu_engine {
  int threads;
  char device[64];
};

static void *cpu_open(int threads, char *err, size_t n) {
  struct cpu_engine *e = calloc(1, sizeof *e);
  if (e == NULL) {
    snprintf(err, n, "no memory");
    return NULL;
  }
  e->threads = threads;
  snprintf(e->device, sizeof e->device, "%d threads", threads);
  return e;
}

static void cpu_close(void *engine) { free(engine); }

static const char *cpu_device(void *engine) { return ((struct cpu_engine *)engine)->device; }

static int cpu_ceilings(void *engine, int quick, struct bench_ceilings *out, char *err,
                        size_t n) {
  const struct cpu_engine *e = engine;
  const int repeats = quick ? 3 : 5;
  cli_progress("cpu ceilings");
  out->bytes_per_s = bench_cpu_read_bandwidth(e->threads, (size_t)1 << 30, repeats);
  out->page_bytes_per_s = bench_cpu_page_read_bandwidth(e->threads, (size_t)1 << 30, repeats);
  out->flops_per_s = bench_cpu_fma_peak(e->threads);
  return 0;
}

/* A job is a struct bench_call on host buffers it owns. */
static void cpu_teardown(void *job) {
  struct bench_call *c = job;
  if (c == NULL)
    return;
  m3idx_context_destroy(c->ctx);
  free(c->scores);
  free(c->topk);
  free((void *)c->cand);
  free((void *)c->cand_scores);
  free(c);
}

static void *cpu_setup(void *engine, const struct bench_job *job, char *err, size_t n) {
  const struct cpu_engine *e = engine;
  const m3idx_batch *b = &job->batch;
  struct bench_call *c = calloc(1, sizeof *c);
  if (c == NULL) {
    snprintf(err, n, "no memory");
    return NULL;
  }
  m3idx_options o;
  m3idx_options_init(&o);
  o.backend = M3IDX_BACKEND_CPU;
  o.threads = job->threads ? job->threads : e->threads;
  o.max_reqs = b->num_reqs;
  o.max_model_len = b->max_seq_len;
  o.max_rows = b->num_rows;
  o.max_heads = b->num_heads;
  o.flags = job->flags;
  if (m3idx_context_create(&o, &c->ctx) != M3IDX_OK) {
    snprintf(err, n, "%s", m3idx_last_error(NULL));
    free(c);
    return NULL;
  }
  const struct synth *d = job->data;
  c->batch = *b;
  c->stage = job->stage;
  c->q = (m3idx_query){b->mode == M3IDX_MODE_PREFILL ? d->prefill_query : d->decode_query,
                       M3IDX_DTYPE_BF16, 0.08838835f};
  c->k = (m3idx_kcache){d->pages, d->num_pages, d->block_table, d->bt_stride};
  c->stride = synth_blocks_of(b->max_seq_len);
  size_t rows = (size_t)b->num_heads * (size_t)b->num_rows;
  c->scores = calloc(rows * (size_t)c->stride + 1, sizeof(float));
  c->topk = calloc(rows * M3IDX_TOPK + 1, sizeof(int32_t));
  if (!c->scores || !c->topk) {
    snprintf(err, n, "no memory for the outputs");
    cpu_teardown(c);
    return NULL;
  }
  if (job->stage == BENCH_TOPK)
    memcpy(c->scores, d->scores, sizeof(float) * rows * (size_t)c->stride);
  return c;
}

static int cpu_time(void *job, enum bench_mode mode, int repeats, struct bench_timing *out, char *err,
                    size_t n) {
  struct bench_call *c = job;
  double v[32];
  if (repeats > 31)
    repeats = 31;
  for (int r = 0; r <= repeats; r++) { /* r = 0 warms up */
    double t0 = cli_now();
    m3idx_status st = bench_call_once(c, mode);
    if (st != M3IDX_OK) {
      snprintf(err, n, "%s", m3idx_last_error(c->ctx));
      return -1;
    }
    if (r > 0)
      v[r - 1] = cli_now() - t0;
  }
  bench_timing_of(v, repeats, out);
  return 0;
}

static int cpu_outputs(void *job, const float **scores, const int32_t **topk, char *err,
                       size_t n) {
  struct bench_call *c = job;
  if (bench_call_once(c, BENCH_FUSED) != M3IDX_OK) {
    snprintf(err, n, "%s", m3idx_last_error(c->ctx));
    return -1;
  }
  *scores = c->stage == BENCH_TOPK ? NULL : c->scores;
  *topk = c->topk;
  return 0;
}

static int cpu_set_candidate(void *job, const int32_t *ids, const float *scores,
                             m3idx_verify_summary *summary, char *err, size_t n) {
  struct bench_call *c = job;
  const size_t rows = (size_t)c->batch.num_heads * (size_t)c->batch.num_rows;
  int32_t *i = malloc(sizeof(int32_t) * rows * M3IDX_TOPK + 1);
  float *s = malloc(sizeof(float) * rows * (size_t)c->stride + 1);
  if (!i || !s) {
    free(i);
    free(s);
    snprintf(err, n, "no memory for the candidate");
    return -1;
  }
  memcpy(i, ids, sizeof(int32_t) * rows * M3IDX_TOPK);
  memcpy(s, scores, sizeof(float) * rows * (size_t)c->stride);
  free((void *)c->cand);
  free((void *)c->cand_scores);
  c->cand = i;
  c->cand_scores = s;
  c->summary = summary;
  return 0;
}

const struct bench_engine bench_engine_cpu = {
    .name = "cpu",
    .open = cpu_open,
    .close = cpu_close,
    .device = cpu_device,
    .ceilings = cpu_ceilings,
    .setup = cpu_setup,
    .time = cpu_time,
    .outputs = cpu_outputs,
    .set_candidate = cpu_set_candidate,
    .teardown = cpu_teardown,
};
