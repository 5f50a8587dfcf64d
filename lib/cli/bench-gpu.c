/*
 * bench-gpu.c - the benchmark's GPU side: the HIP plugin's devtools for
 * device buffers, a stream and event timing; the calls themselves go
 * through the public API with device pointers, as a serving engine makes
 * them.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "devtools.h"

#ifndef M3IDX_PLUGIN_DIR
#define M3IDX_PLUGIN_DIR "/usr/local/lib/m3idx"
#endif

struct bench_gpu {
  void *handle;
  const struct m3idx_devtools *dt;
  void *stream;
  char name[256];
};

struct bench_gpu *bench_gpu_open(char *err, size_t n) {
  const char *why = m3idx_backend_unavailable_reason(M3IDX_BACKEND_HIP);
  if (why) {
    snprintf(err, n, "%s", why);
    return NULL;
  }
  const char *dir = getenv("M3IDX_PLUGIN_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/m3idx-hip.so", dir && *dir ? dir : M3IDX_PLUGIN_DIR);
  struct bench_gpu *g = calloc(1, sizeof *g);
  g->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  void *sym = g->handle ? dlsym(g->handle, M3IDX_DEVTOOLS_ENTRY) : NULL;
  m3idx_devtools_entry_fn entry;
  memcpy(&entry, &sym, sizeof entry);
  g->dt = sym ? entry() : NULL;
  if (!g->dt || g->dt->abi != M3IDX_DEVTOOLS_ABI || g->dt->stream_create(&g->stream, err, n)) {
    if (!g->dt)
      snprintf(err, n, "the plugin %s has no devtools", path);
    free(g);
    return NULL;
  }
  g->dt->device_name(g->name, sizeof g->name);
  return g;
}

void bench_gpu_close(struct bench_gpu *g) {
  if (!g)
    return;
  g->dt->stream_destroy(g->stream);
  free(g);
}

const char *bench_gpu_name(struct bench_gpu *g) { return g->name; }

int bench_gpu_ceilings(struct bench_gpu *g, double *copy_bps, double *fma, char *err, size_t n) {
  if (g->dt->copy_bandwidth((size_t)4 << 30, 10, copy_bps, err, n))
    return -1;
  return g->dt->fma_peak(fma, err, n);
}

struct timed {
  m3idx_context *ctx;
  const m3idx_batch *batch;
  m3idx_query q;
  m3idx_kcache k;
  enum bench_stage stage;
  int fused;
  int calls;
  int32_t *map, cap;
  float *scores;
  int64_t stride;
  int32_t *topk;
  m3idx_status st;
};

static int run_calls(void *arg) {
  struct timed *t = arg;
  for (int i = 0; i < t->calls && t->st == M3IDX_OK; i++) {
    switch (t->stage) {
    case BENCH_DECODE:
      t->st = t->fused ? m3idx_index_topk_decode(t->ctx, t->batch, &t->q, &t->k, 0, 1, t->map,
                                                 t->cap, t->topk, t->scores, t->stride)
                       : m3idx_score_decode(t->ctx, t->batch, &t->q, &t->k, t->map, t->cap,
                                            t->scores, t->stride);
      break;
    case BENCH_PREFILL:
      t->st = t->fused ? m3idx_index_topk_prefill(t->ctx, t->batch, &t->q, &t->k, 0, 1, t->topk,
                                                  t->scores, t->stride)
                       : m3idx_score_prefill(t->ctx, t->batch, &t->q, &t->k, t->scores,
                                             t->stride);
      break;
    case BENCH_TOPK:
      t->st = m3idx_topk_from_scores(t->ctx, t->batch, t->scores, t->stride, t->topk);
      break;
    }
  }
  return t->st == M3IDX_OK ? 0 : -1;
}

/* Median seconds per call: a warm-up sizes the batch of calls timed. */
static int time_stage(struct bench_gpu *g, struct timed *t, int repeats, double *out, char *err,
                      size_t n) {
  double sec = 0.0;
  t->calls = 1;
  if (g->dt->time_on_stream(g->stream, run_calls, t, &sec, err, n))
    return -1;
  t->calls = sec > 0.0 ? (int)(0.02 / sec) + 1 : 100;
  if (t->calls > 200)
    t->calls = 200;
  double v[16];
  if (repeats > 16)
    repeats = 16;
  for (int r = 0; r < repeats; r++) {
    if (g->dt->time_on_stream(g->stream, run_calls, t, &sec, err, n))
      return -1;
    v[r] = sec / t->calls;
  }
  *out = cli_median(v, repeats);
  m3idx_status st = m3idx_synchronize(t->ctx);
  if (st != M3IDX_OK) {
    snprintf(err, n, "%s", m3idx_last_error(t->ctx));
    return -1;
  }
  return 0;
}

#define UPLOAD(dst, src, bytes)                                                          \
  do {                                                                                   \
    if (g->dt->alloc((void **)&(dst), (bytes), err, n) ||                                \
        ((src) && g->dt->to_device((dst), (src), (bytes), err, n)))                      \
      goto out;                                                                          \
  } while (0)

int bench_gpu_run(struct bench_gpu *g, const struct bench_data *d, const m3idx_batch *batch,
                  enum bench_stage stage, int repeats, double *score_s, double *fused_s,
                  int32_t *check_topk, float *check_scores, char *err, size_t n) {
  int rc = -1;
  int32_t *seq = NULL, *bt = NULL, *cu = NULL, *cl = NULL, *map = NULL, *topk = NULL;
  uint8_t *pages = NULL;
  uint16_t *query = NULL;
  float *scores = NULL;
  m3idx_context *ctx = NULL;
  struct timed t;
  memset(&t, 0, sizeof t);
  int64_t width = (batch->max_seq_len + 127) / 128;
  size_t rows = (size_t)batch->num_heads * (size_t)batch->num_rows;
  UPLOAD(seq, d->seq_lens, sizeof(int32_t) * (size_t)batch->num_reqs);
  if (stage != BENCH_TOPK) {
    UPLOAD(bt, d->block_table, sizeof(int32_t) * (size_t)batch->num_reqs * (size_t)d->bt_stride);
    UPLOAD(pages, d->pages, (size_t)d->num_pages * M3IDX_PAGE_BYTES);
    UPLOAD(query, d->query, sizeof(uint16_t) * (size_t)batch->num_rows * batch->num_heads * 128);
  }
  UPLOAD(scores, stage == BENCH_TOPK ? d->scores : NULL, sizeof(float) * rows * (size_t)width);
  UPLOAD(topk, NULL, sizeof(int32_t) * rows * M3IDX_TOPK);
  if (batch->mode == M3IDX_MODE_PREFILL) {
    UPLOAD(cu, batch->cu_seqlens_q, sizeof(int32_t) * (size_t)(batch->num_reqs + 1));
    UPLOAD(cl, batch->context_lens, sizeof(int32_t) * (size_t)batch->num_reqs);
  }
  m3idx_options o;
  m3idx_options_init(&o);
  o.backend = M3IDX_BACKEND_HIP;
  o.stream = g->stream;
  o.max_reqs = batch->num_reqs;
  o.max_model_len = batch->max_seq_len;
  o.max_rows = batch->num_rows;
  o.max_heads = batch->num_heads;
  if (m3idx_context_create(&o, &ctx) != M3IDX_OK) {
    snprintf(err, n, "%s", m3idx_last_error(NULL));
    goto out;
  }
  m3idx_batch db = *batch;
  db.seq_lens = seq;
  db.cu_seqlens_q = cu;
  db.context_lens = cl;
  t = (struct timed){.ctx = ctx, .batch = &db, .q = {query, M3IDX_DTYPE_BF16, 0.08838835f},
                     .k = {pages, d->num_pages, bt, d->bt_stride}, .stage = stage,
                     .scores = scores, .stride = width, .topk = topk, .st = M3IDX_OK};
  if (stage == BENCH_DECODE) {
    if (m3idx_work_map_capacity(batch->num_reqs, (int32_t)width, batch->query_len,
                                batch->num_heads, &t.cap) != M3IDX_OK)
      goto out;
    UPLOAD(map, NULL, sizeof(int32_t) * 2 * (size_t)t.cap);
    if (m3idx_work_map_build(ctx, &db, map, t.cap) != M3IDX_OK) {
      snprintf(err, n, "%s", m3idx_last_error(ctx));
      goto out;
    }
    t.map = map;
  }
  t.fused = 0;
  if (time_stage(g, &t, repeats, score_s, err, n))
    goto out;
  if (stage != BENCH_TOPK) {
    t.fused = 1;
    if (time_stage(g, &t, repeats, fused_s, err, n))
      goto out;
  } else {
    *fused_s = *score_s;
  }
  if (check_topk && g->dt->to_host(check_topk, topk, sizeof(int32_t) * rows * M3IDX_TOPK, err, n))
    goto out;
  if (check_scores && stage != BENCH_TOPK &&
      g->dt->to_host(check_scores, scores, sizeof(float) * rows * (size_t)width, err, n))
    goto out;
  rc = 0;
out:
  if (t.st != M3IDX_OK && ctx)
    snprintf(err, n, "%s", m3idx_last_error(ctx));
  m3idx_context_destroy(ctx);
  void *all[] = {seq, bt, cu, cl, map, topk, pages, query, scores};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (all[i])
      g->dt->release(all[i]);
  return rc;
}
