/*
 * stage-plan.h - a call's host arrays in one device buffer: where each
 * goes (stage_plan_of), the copies in (stage_in) and out (stage_out).
 * Contexts made with M3IDX_FLAG_HOST_POINTERS stage every call this way,
 * and so does the self-check of the scoring kernels (path-check.hip).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_GPU_STAGE_PLAN_H
#define M3IDX_GPU_STAGE_PLAN_H

#include <stddef.h>

#include "backend.h"
#include "buffer-plan.h"
#include "gpu-runtime.h"

/* Offsets of a call's arrays in the buffer (0 for arrays it has not), and
 * the buffer's size. */
struct stage_plan {
  size_t seq, cu, ctx, query, pages, bt, map, scores, topk, used;
  bool prefill, keys, scores_io;
};

static inline size_t stage_query_bytes(const struct m3idx_call *c) {
  return (size_t)c->num_rows * (size_t)c->num_heads * M3IDX_HEAD_DIM *
         (c->query_dtype == M3IDX_DTYPE_BF16 ? 2 : 1);
}

static inline size_t stage_score_bytes(const struct m3idx_call *c) {
  return (size_t)c->num_heads * (size_t)c->num_rows * (size_t)c->score_stride * sizeof(float);
}

static inline size_t stage_topk_bytes(const struct m3idx_call *c) {
  return (size_t)c->num_heads * (size_t)c->num_rows * M3IDX_TOPK * sizeof(int32_t);
}

static inline stage_plan stage_plan_of(const struct m3idx_call *c) {
  stage_plan p{};
  buffer_plan b;
  p.prefill = c->mode == M3IDX_MODE_PREFILL;
  p.keys = c->stage == M3IDX_STAGE_SCORE || c->stage == M3IDX_STAGE_FUSED;
  p.scores_io = c->scores != NULL && c->stage != M3IDX_STAGE_TOPK &&
                c->stage != M3IDX_STAGE_WORK_MAP;
  p.seq = b.take((size_t)c->num_reqs * 4);
  p.cu = p.prefill ? b.take((size_t)(c->num_reqs + 1) * 4) : 0;
  p.ctx = p.prefill ? b.take((size_t)c->num_reqs * 4) : 0;
  p.query = p.keys ? b.take(stage_query_bytes(c)) : 0;
  p.pages = p.keys ? b.take((size_t)c->num_pages * M3IDX_PAGE_BYTES) : 0;
  p.bt = p.keys ? b.take((size_t)c->num_reqs * (size_t)c->bt_stride * 4) : 0;
  p.map = c->work_map_in || c->work_map_out ? b.take((size_t)c->work_map_capacity * 8) : 0;
  p.scores = p.scores_io || c->scores_in ? b.take(stage_score_bytes(c)) : 0;
  p.topk = c->topk ? b.take(stage_topk_bytes(c)) : 0;
  p.used = b.used;
  return p;
}

/* Copy c's inputs (and its scores, whose entries a call does not write
 * stay) into d as p lays them out, on st; *dc receives c with its
 * pointers into d. */
static inline hipError_t stage_in(const struct m3idx_call *c, const stage_plan &p, char *d,
                                  hipStream_t st, struct m3idx_call *dc) {
  *dc = *c;
  hipError_t e = hipSuccess;
  const auto in = [&](size_t off, const void *src, size_t bytes) -> char * {
    if (e == hipSuccess)
      e = hipMemcpyAsync(d + off, src, bytes, hipMemcpyHostToDevice, st);
    return d + off;
  };
  dc->seq_lens = (const int32_t *)in(p.seq, c->seq_lens, (size_t)c->num_reqs * 4);
  if (p.prefill) {
    dc->cu_seqlens_q = (const int32_t *)in(p.cu, c->cu_seqlens_q, (size_t)(c->num_reqs + 1) * 4);
    dc->context_lens = (const int32_t *)in(p.ctx, c->context_lens, (size_t)c->num_reqs * 4);
  }
  if (p.keys) {
    dc->query = in(p.query, c->query, stage_query_bytes(c));
    dc->pages = (const uint8_t *)in(p.pages, c->pages, (size_t)c->num_pages * M3IDX_PAGE_BYTES);
    dc->block_table =
        (const int32_t *)in(p.bt, c->block_table, (size_t)c->num_reqs * (size_t)c->bt_stride * 4);
  }
  if (c->work_map_in)
    dc->work_map_in = (const int32_t *)in(p.map, c->work_map_in, (size_t)c->work_map_capacity * 8);
  if (c->work_map_out)
    dc->work_map_out = (int32_t *)(d + p.map);
  if (p.scores_io)
    dc->scores = (float *)in(p.scores, c->scores, stage_score_bytes(c));
  if (c->scores_in)
    dc->scores_in = (const float *)in(p.scores, c->scores_in, stage_score_bytes(c));
  if (c->topk)
    dc->topk = (int32_t *)(d + p.topk);
  return e;
}

/* Copy c's outputs (scores, top-k, work map) back from d, on st. */
static inline hipError_t stage_out(const struct m3idx_call *c, const stage_plan &p,
                                   const char *d, hipStream_t st) {
  hipError_t e = hipSuccess;
  const auto out = [&](void *dst, size_t off, size_t bytes) {
    if (e == hipSuccess)
      e = hipMemcpyAsync(dst, d + off, bytes, hipMemcpyDeviceToHost, st);
  };
  if (p.scores_io)
    out(c->scores, p.scores, stage_score_bytes(c));
  if (c->topk)
    out(c->topk, p.topk, stage_topk_bytes(c));
  if (c->work_map_out)
    out(c->work_map_out, p.map, (size_t)c->work_map_capacity * 8);
  return e;
}

#endif /* M3IDX_GPU_STAGE_PLAN_H */
