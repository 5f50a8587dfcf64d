/*
 * engine-gpu.c - the bench's GPU engine: the public API with device
 * pointers on a stream, as a serving engine makes its calls, timed with
 * events around batches of calls.  Device buffers, the stream and the
 * ceilings come from the HIP plugin's developer tools, which the library
 * hands out (m3idx__plugin_devtools).
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "devtools.h"

struct gpu_engine {
  const struct m3idx_devtools *dt;
  void *stream;
  char name[256];
};

struct gpu_job {
  struct gpu_engine *g;
  struct bench_call c; /* device buffers, and a batch with device lengths */
  int32_t *seq, *bt, *cu, *cl, *map;
  uint8_t *pages;
  uint16_t *query;
  /* What a timed batch runs. */
  enum bench_mode mode;
  int calls;
  int32_t *cand;
  float *cand_scores;
  m3idx_status st;
  /* Host copies of the outputs. */
  float *host_scores;
  int32_t *host_topk;
};

static void *gpu_open(int threads, char *err, size_t n) {
  const char *why;
  const struct m3idx_devtools *dt = m3idx__plugin_devtools(&why);
  if (dt == NULL) {
    snprintf(err, n, "%s", why);
    return NULL;
  }
  struct gpu_engine *g = calloc(1, sizeof *g);
  if (g == NULL) {
    snprintf(err, n, "no memory");
    return NULL;
  }
  g->dt = dt;
  if (dt->stream_create(&g->stream, err, n)) {
    free(g);
    return NULL;
  }
  dt->device_name(g->name, sizeof g->name);
  return g;
}

static void gpu_close(void *engine) {
  struct gpu_engine *g = engine;
  g->dt->stream_destroy(g->stream);
  free(g);
}

static const char *gpu_device(void *engine) { return ((struct gpu_engine *)engine)->name; }

static int gpu_ceilings(void *engine, int quick, struct bench_ceilings *out, char *err,
                        size_t n) {
  struct gpu_engine *g = engine;
  cli_progress("gpu ceilings");
  if (g->dt->copy_bandwidth((size_t)4 << 30, 10, &out->bytes_per_s, err, n) ||
      g->dt->read_bandwidth((size_t)4 << 30, 10, &out->page_bytes_per_s, err, n))
    return -1;
  return g->dt->fma_peak(&out->flops_per_s, err, n);
}

static int run_calls(void *arg) {
  struct gpu_job *t = arg;
  for (int i = 0; i < t->calls && t->st == M3IDX_OK; i++)
    t->st = bench_call_once(&t->c, t->mode);
  return t->st == M3IDX_OK ? 0 : -1;
}

static void gpu_teardown(void *job) {
  struct gpu_job *t = job;
  if (t == NULL)
    return;
  m3idx_context_destroy(t->c.ctx);
  void *all[] = {t->seq,   t->bt,    t->cu,       t->cl,        t->map,          t->c.topk,
                 t->pages, t->query, t->c.scores, t->cand, t->cand_scores};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (all[i])
      t->g->dt->release(all[i]);
  free(t->host_scores);
  free(t->host_topk);
  free(t);
}

/* A device buffer of `bytes', holding src's bytes when src is not NULL. */
static int upload(struct gpu_engine *g, void *dst, const void *src, size_t bytes, char *err,
                  size_t n) {
  void *p = NULL;
  if (g->dt->alloc(&p, bytes, err, n))
    return -1;
  memcpy(dst, &p, sizeof p);
  return src && g->dt->to_device(p, src, bytes, err, n) ? -1 : 0;
}

static void *gpu_setup(void *engine, const struct bench_job *job, char *err, size_t n) {
  struct gpu_engine *g = engine;
  const struct synth *d = job->data;
  const m3idx_batch *b = &job->batch;
  struct gpu_job *t = calloc(1, sizeof *t);
  if (t == NULL) {
    snprintf(err, n, "no memory");
    return NULL;
  }
  struct bench_call *c = &t->c;
  t->g = g;
  c->stage = job->stage;
  c->stride = synth_blocks_of(b->max_seq_len);
  const size_t rows = (size_t)b->num_heads * (size_t)b->num_rows;
  const uint16_t *query = b->mode == M3IDX_MODE_PREFILL ? d->prefill_query : d->decode_query;
  t->host_scores = malloc(sizeof(float) * rows * (size_t)c->stride + 1);
  t->host_topk = malloc(sizeof(int32_t) * rows * M3IDX_TOPK + 1);
  if (!t->host_scores || !t->host_topk) {
    snprintf(err, n, "no memory for the outputs");
    goto fail;
  }
  if (upload(g, &t->seq, d->seq_lens, sizeof(int32_t) * (size_t)b->num_reqs, err, n) ||
      upload(g, &c->scores, job->stage == BENCH_TOPK ? d->scores : NULL,
             sizeof(float) * rows * (size_t)c->stride, err, n) ||
      upload(g, &c->topk, NULL, sizeof(int32_t) * rows * M3IDX_TOPK, err, n))
    goto fail;
  if (job->stage != BENCH_TOPK &&
      (upload(g, &t->bt, d->block_table,
              sizeof(int32_t) * (size_t)b->num_reqs * (size_t)d->bt_stride, err, n) ||
       upload(g, &t->pages, d->pages, (size_t)d->num_pages * M3IDX_PAGE_BYTES, err, n) ||
       upload(g, &t->query, query, sizeof(uint16_t) * rows * M3IDX_HEAD_DIM, err, n)))
    goto fail;
  if (b->mode == M3IDX_MODE_PREFILL &&
      (upload(g, &t->cu, b->cu_seqlens_q, sizeof(int32_t) * (size_t)(b->num_reqs + 1), err, n) ||
       upload(g, &t->cl, b->context_lens, sizeof(int32_t) * (size_t)b->num_reqs, err, n)))
    goto fail;
  m3idx_options o;
  m3idx_options_init(&o);
  o.backend = M3IDX_BACKEND_HIP;
  o.stream = g->stream;
  o.max_reqs = b->num_reqs;
  o.max_model_len = b->max_seq_len;
  o.max_rows = b->num_rows;
  o.max_heads = b->num_heads;
  if (m3idx_context_create(&o, &c->ctx) != M3IDX_OK) {
    snprintf(err, n, "%s", m3idx_last_error(NULL));
    goto fail;
  }
  c->batch = *b;
  c->batch.seq_lens = t->seq;
  c->batch.cu_seqlens_q = t->cu;
  c->batch.context_lens = t->cl;
  c->q = (m3idx_query){t->query, M3IDX_DTYPE_BF16, 0.08838835f};
  c->k = (m3idx_kcache){t->pages, d->num_pages, t->bt, d->bt_stride};
  t->st = M3IDX_OK;
  if (job->stage == BENCH_DECODE) {
    if (m3idx_work_map_capacity(b->num_reqs, (int32_t)c->stride, b->query_len, b->num_heads,
                                &c->cap) != M3IDX_OK ||
        upload(g, &t->map, NULL, sizeof(int32_t) * 2 * (size_t)c->cap, err, n))
      goto fail;
    if (m3idx_work_map_build(c->ctx, &c->batch, t->map, c->cap) != M3IDX_OK) {
      snprintf(err, n, "%s", m3idx_last_error(c->ctx));
      goto fail;
    }
    c->map = t->map;
  }
  return t;
fail:
  gpu_teardown(t);
  return NULL;
}

/* The call's status once the stream has drained. */
static int settle(struct gpu_job *t, char *err, size_t n) {
  if (t->st == M3IDX_OK)
    t->st = m3idx_synchronize(t->c.ctx);
  if (t->st != M3IDX_OK) {
    snprintf(err, n, "%s", m3idx_last_error(t->c.ctx));
    return -1;
  }
  return 0;
}

/* Median seconds per call: a warm-up sizes the batch of calls timed. */
static int gpu_time(void *job, enum bench_mode mode, int repeats, struct bench_timing *out, char *err,
                    size_t n) {
  struct gpu_job *t = job;
  struct gpu_engine *g = t->g;
  double sec = 0.0, v[16];
  t->mode = mode;
  t->calls = 1;
  /* On a failure, settle puts the library's message (when a call failed)
     over the runtime's. */
  if (g->dt->time_on_stream(g->stream, run_calls, t, &sec, err, n)) {
    settle(t, err, n);
    return -1;
  }
  t->calls = sec > 0.0 ? (int)(0.02 / sec) + 1 : 100;
  if (t->calls > 200)
    t->calls = 200;
  if (repeats > 16)
    repeats = 16;
  for (int r = 0; r < repeats; r++) {
    if (g->dt->time_on_stream(g->stream, run_calls, t, &sec, err, n)) {
      settle(t, err, n);
      return -1;
    }
    v[r] = sec / t->calls;
  }
  bench_timing_of(v, repeats, out);
  return settle(t, err, n);
}

static int gpu_outputs(void *job, const float **scores, const int32_t **topk, char *err,
                       size_t n) {
  struct gpu_job *t = job;
  const struct m3idx_devtools *dt = t->g->dt;
  const struct bench_call *c = &t->c;
  const size_t rows = (size_t)c->batch.num_heads * (size_t)c->batch.num_rows;
  t->st = bench_call_once(c, BENCH_FUSED);
  if (settle(t, err, n))
    return -1;
  if (dt->to_host(t->host_topk, c->topk, sizeof(int32_t) * rows * M3IDX_TOPK, err, n))
    return -1;
  if (c->stage != BENCH_TOPK &&
      dt->to_host(t->host_scores, c->scores, sizeof(float) * rows * (size_t)c->stride, err, n))
    return -1;
  *scores = c->stage == BENCH_TOPK ? NULL : t->host_scores;
  *topk = t->host_topk;
  return 0;
}

/* The candidate in device memory: verify reads it where it is. */
static int gpu_set_candidate(void *job, const int32_t *ids, const float *scores,
                             m3idx_verify_summary *summary, char *err, size_t n) {
  struct gpu_job *t = job;
  struct bench_call *c = &t->c;
  const size_t rows = (size_t)c->batch.num_heads * (size_t)c->batch.num_rows;
  c->summary = summary;
  if (t->cand)
    t->g->dt->release(t->cand);
  if (t->cand_scores)
    t->g->dt->release(t->cand_scores);
  t->cand = NULL;
  t->cand_scores = NULL;
  if (upload(t->g, &t->cand, ids, sizeof(int32_t) * rows * M3IDX_TOPK, err, n) ||
      upload(t->g, &t->cand_scores, scores, sizeof(float) * rows * (size_t)c->stride, err, n))
    return -1;
  c->cand = t->cand;
  c->cand_scores = t->cand_scores;
  return 0;
}

const struct bench_engine bench_engine_gpu = {
    .name = "hip",
    .open = gpu_open,
    .close = gpu_close,
    .device = gpu_device,
    .ceilings = gpu_ceilings,
    .setup = gpu_setup,
    .time = gpu_time,
    .outputs = gpu_outputs,
    .set_candidate = gpu_set_candidate,
    .teardown = gpu_teardown,
};
