/*
 * cpu-backend.c - the CPU reference's backend table: scratch sized once
 * from the context's limits, and each stage run on it.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "work-map.h"

static const char *cpu_unavailable_reason(void) { return NULL; }

static void *scratch(struct m3idx_cpu_state *s, size_t bytes, int touch) {
  void *p = NULL;
  if (bytes == 0)
    bytes = 64;
  bytes = (bytes + 63) / 64 * 64;
  if (posix_memalign(&p, 64, bytes) != 0)
    return NULL;
  if (touch)
    m3idx__cpu_first_touch(s, p, bytes);
  return p;
}

static void cpu_destroy(void *state) {
  struct m3idx_cpu_state *s = state;
  if (s == NULL)
    return;
  free(s->query_f32);
  free(s->query_spread);
  free(s->query_digits);
  free(s->scores);
  free(s->row_pos);
  free(s->map);
  free(s->prefix);
  free(s);
}

static m3idx_status cpu_create(const struct m3idx_backend_config *cfg,
                               void **state, struct m3idx_errbuf *err) {
  struct m3idx_cpu_state *s = calloc(1, sizeof *s);
  if (s == NULL)
    return M3IDX_ERR_NO_MEMORY;
  s->config = *cfg;
  m3idx_status st = m3idx__cpu_threads_resolve(cfg->threads, &s->threads, err);
  if (st != M3IDX_OK) {
    free(s);
    return st;
  }
  s->kernel = m3idx__cpu_pick_kernel(&s->kernel_name, &s->terms, &s->floor_key, err);
  if (s->kernel == NULL) {
    free(s);
    return M3IDX_ERR_UNSUPPORTED;
  }
  s->numa = m3idx__cpu_place_threads(s);
  s->max_width = m3idx__blocks_of(cfg->max_model_len);
  /* The smallest chunk gives the largest map any batch needs. */
  int64_t cap = m3idx__work_map_capacity_of(cfg->max_reqs, s->max_width, M3IDX_WORK_CHUNK_MIN);
  if (cap > INT32_MAX / 2) {
    snprintf(err->msg, sizeof err->msg,
             "max_reqs %d x max_model_len %d need a work map larger than int32 indexing allows",
             (int)cfg->max_reqs, (int)cfg->max_model_len);
    free(s);
    return M3IDX_ERR_LIMIT;
  }
  s->map_capacity = (int32_t)cap;
  size_t rows_heads = (size_t)cfg->max_rows * (size_t)cfg->max_heads;
  s->query_f32 = scratch(s, rows_heads * M3IDX_HEAD_DIM * sizeof(float), 1);
  s->query_spread = scratch(s, rows_heads, 1);
  s->query_digits = scratch(s, rows_heads * sizeof *s->query_digits, 1);
  s->scores = scratch(s, rows_heads * (size_t)s->max_width * sizeof(float), 1);
  s->row_pos = scratch(s, (size_t)cfg->max_rows * sizeof(int32_t), 0);
  s->map = scratch(s, (size_t)cap * 2 * sizeof(int32_t), 0);
  s->prefix = scratch(s, ((size_t)cfg->max_reqs + 1) * sizeof(int64_t), 0);
  if (!s->query_f32 || !s->query_spread || !s->query_digits || !s->scores || !s->row_pos || !s->map || !s->prefix) {
    snprintf(err->msg, sizeof err->msg,
             "no memory for scratch of %zu rows x %d blocks (max_rows x max_heads x max_model_len / 128)",
             rows_heads, (int)s->max_width);
    cpu_destroy(s);
    return M3IDX_ERR_NO_MEMORY;
  }
  *state = s;
  return M3IDX_OK;
}

static void score(struct m3idx_cpu_state *s, const struct m3idx_call *c,
                  float *scores, int64_t stride) {
  m3idx__cpu_decode_queries(s, c);
  if (c->mode == M3IDX_MODE_DECODE)
    m3idx__cpu_score_decode(s, c, c->work_map_in, scores, stride);
  else
    m3idx__cpu_score_prefill(s, c, scores, stride);
}

static m3idx_status cpu_run(void *state, const struct m3idx_call *c,
                            struct m3idx_errbuf *err) {
  struct m3idx_cpu_state *s = state;
  (void)err;
  switch (c->stage) {
  case M3IDX_STAGE_WORK_MAP:
    m3idx__work_map_fill(c->work_map_out, c->work_map_capacity, c->seq_lens,
                         c->num_reqs,
                         m3idx__work_chunk_blocks(c->query_len, c->num_heads));
    return M3IDX_OK;
  case M3IDX_STAGE_SCORE:
    score(s, c, c->scores, c->score_stride);
    return M3IDX_OK;
  case M3IDX_STAGE_PIN:
    m3idx__cpu_pin_topk(s, c, c->scores, c->score_stride, 1, NULL, NULL);
    return M3IDX_OK;
  case M3IDX_STAGE_TOPK:
    m3idx__cpu_pin_topk(s, c, NULL, c->score_stride, 0, c->scores_in, c->topk);
    return M3IDX_OK;
  case M3IDX_STAGE_BOUND:
    m3idx__cpu_block_bounds(s, c);
    return M3IDX_OK;
  case M3IDX_STAGE_VERIFY: /* the front-end decides on host memory itself */
    break;
  case M3IDX_STAGE_FUSED: {
    float *scores = c->scores ? c->scores : s->scores;
    score(s, c, scores, c->score_stride);
    m3idx__cpu_pin_topk(s, c, scores, c->score_stride, 1, NULL, c->topk);
    return M3IDX_OK;
  }
  }
  return M3IDX_ERR_INVALID_ARGUMENT;
}

static m3idx_status cpu_synchronize(void *state, struct m3idx_errbuf *err) {
  (void)state;
  (void)err;
  return M3IDX_OK; /* every CPU call completes before it returns */
}

const struct m3idx_backend_ops m3idx_cpu_backend_ops = {
    .abi = M3IDX_BACKEND_ABI,
    .name = "cpu",
    .unavailable_reason = cpu_unavailable_reason,
    .create = cpu_create,
    .destroy = cpu_destroy,
    .run = cpu_run,
    .synchronize = cpu_synchronize,
};
