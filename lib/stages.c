/*
 * stages.c - the public stage calls: check once, then run on the backend.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <stdint.h>
#include <string.h>

#include "call-checks.h"
#include "checks.h"

#define TRY(expr)                                                          \
  do {                                                                     \
    m3idx_status st_ = (expr);                                             \
    if (st_ != M3IDX_OK)                                                   \
      return st_;                                                          \
  } while (0)

static m3idx_status begin(m3idx_context *ctx) {
  if (ctx == NULL)
    return m3idx__fail(NULL, M3IDX_ERR_NULL_POINTER, "ctx is NULL");
  m3idx__clear_error(ctx);
  return M3IDX_OK;
}

/* Runs a checked call on the backend; a call with no rows (a prefill
 * batch) has nothing to write, and returns once its arguments are checked. */
static m3idx_status run(m3idx_context *ctx, const struct m3idx_call *c) {
  TRY(m3idx__check_outputs_apart(ctx, c));
  if (c->stage != M3IDX_STAGE_WORK_MAP && c->num_rows == 0)
    return M3IDX_OK;
  struct m3idx_errbuf err;
  err.msg[0] = '\0';
  m3idx_status st = ctx->ops->run(ctx->state, c, &err);
  return m3idx__backend_failed(ctx, st, &err);
}

m3idx_status m3idx_score_decode(m3idx_context *ctx, const m3idx_batch *batch,
                                const m3idx_query *query,
                                const m3idx_kcache *kcache,
                                const int32_t *work_map,
                                int32_t work_map_capacity, float *scores,
                                int64_t score_stride) {
  struct m3idx_call c = {.stage = M3IDX_STAGE_SCORE};
  TRY(begin(ctx));
  TRY(m3idx__check_batch(ctx, batch, M3IDX_MODE_DECODE, &c));
  TRY(m3idx__check_query(ctx, query, &c));
  TRY(m3idx__check_kcache(ctx, kcache, &c));
  TRY(m3idx__check_scores(ctx, scores, score_stride, 0, &c));
  TRY(m3idx__check_work_map(ctx, work_map, work_map_capacity, 0, &c));
  c.work_map_in = work_map;
  c.scores = scores;
  return run(ctx, &c);
}

m3idx_status m3idx_score_prefill(m3idx_context *ctx, const m3idx_batch *batch,
                                 const m3idx_query *query,
                                 const m3idx_kcache *kcache, float *scores,
                                 int64_t score_stride) {
  struct m3idx_call c = {.stage = M3IDX_STAGE_SCORE};
  TRY(begin(ctx));
  TRY(m3idx__check_batch(ctx, batch, M3IDX_MODE_PREFILL, &c));
  TRY(m3idx__check_query(ctx, query, &c));
  TRY(m3idx__check_kcache(ctx, kcache, &c));
  TRY(m3idx__check_scores(ctx, scores, score_stride, 0, &c));
  c.scores = scores;
  return run(ctx, &c);
}

m3idx_status m3idx_pin_forced_blocks(m3idx_context *ctx,
                                     const m3idx_batch *batch,
                                     int32_t init_blocks, int32_t local_blocks,
                                     float *scores, int64_t score_stride) {
  struct m3idx_call c = {.stage = M3IDX_STAGE_PIN};
  TRY(begin(ctx));
  TRY(m3idx__check_batch(ctx, batch, 0, &c));
  TRY(m3idx__check_forced(ctx, init_blocks, local_blocks, &c));
  TRY(m3idx__check_scores(ctx, scores, score_stride, 0, &c));
  c.scores = scores;
  return run(ctx, &c);
}

m3idx_status m3idx_topk_from_scores(m3idx_context *ctx,
                                    const m3idx_batch *batch,
                                    const float *scores, int64_t score_stride,
                                    int32_t *topk) {
  struct m3idx_call c = {.stage = M3IDX_STAGE_TOPK};
  TRY(begin(ctx));
  TRY(m3idx__check_batch(ctx, batch, 0, &c));
  TRY(m3idx__check_scores(ctx, scores, score_stride, 0, &c));
  TRY(m3idx__check_topk(ctx, topk, &c));
  c.scores_in = scores;
  return run(ctx, &c);
}

m3idx_status m3idx_index_topk_decode(m3idx_context *ctx,
                                     const m3idx_batch *batch,
                                     const m3idx_query *query,
                                     const m3idx_kcache *kcache,
                                     int32_t init_blocks, int32_t local_blocks,
                                     const int32_t *work_map,
                                     int32_t work_map_capacity, int32_t *topk,
                                     float *scores, int64_t score_stride) {
  struct m3idx_call c = {.stage = M3IDX_STAGE_FUSED};
  TRY(begin(ctx));
  TRY(m3idx__check_batch(ctx, batch, M3IDX_MODE_DECODE, &c));
  TRY(m3idx__check_query(ctx, query, &c));
  TRY(m3idx__check_kcache(ctx, kcache, &c));
  TRY(m3idx__check_forced(ctx, init_blocks, local_blocks, &c));
  TRY(m3idx__check_topk(ctx, topk, &c));
  TRY(m3idx__check_scores(ctx, scores, score_stride, 1, &c));
  TRY(m3idx__check_work_map(ctx, work_map, work_map_capacity, 0, &c));
  c.work_map_in = work_map;
  c.scores = scores;
  return run(ctx, &c);
}

m3idx_status m3idx_index_topk_prefill(m3idx_context *ctx,
                                      const m3idx_batch *batch,
                                      const m3idx_query *query,
                                      const m3idx_kcache *kcache,
                                      int32_t init_blocks,
                                      int32_t local_blocks, int32_t *topk,
                                      float *scores, int64_t score_stride) {
  struct m3idx_call c = {.stage = M3IDX_STAGE_FUSED};
  TRY(begin(ctx));
  TRY(m3idx__check_batch(ctx, batch, M3IDX_MODE_PREFILL, &c));
  TRY(m3idx__check_query(ctx, query, &c));
  TRY(m3idx__check_kcache(ctx, kcache, &c));
  TRY(m3idx__check_forced(ctx, init_blocks, local_blocks, &c));
  TRY(m3idx__check_topk(ctx, topk, &c));
  TRY(m3idx__check_scores(ctx, scores, score_stride, 1, &c));
  c.scores = scores;
  return run(ctx, &c);
}

m3idx_status m3idx_work_map_build(m3idx_context *ctx, const m3idx_batch *batch,
                                  int32_t *work_map, int32_t work_map_capacity) {
  struct m3idx_call c = {.stage = M3IDX_STAGE_WORK_MAP};
  TRY(begin(ctx));
  TRY(m3idx__check_batch(ctx, batch, M3IDX_MODE_DECODE, &c));
  TRY(m3idx__check_work_map(ctx, work_map, work_map_capacity, 1, &c));
  c.work_map_out = work_map;
  return run(ctx, &c);
}

m3idx_status m3idx_synchronize(m3idx_context *ctx) {
  TRY(begin(ctx));
  struct m3idx_errbuf err;
  err.msg[0] = '\0';
  m3idx_status st = ctx->ops->synchronize(ctx->state, &err);
  return m3idx__backend_failed(ctx, st, &err);
}

void m3idx__probe_context(struct m3idx_context *probe) {
  memset(probe, 0, sizeof *probe);
  probe->backend = M3IDX_BACKEND_CPU;
  probe->host_visible = 1;
  probe->config.max_reqs = probe->config.max_rows = probe->config.max_heads = INT32_MAX;
  probe->config.max_model_len = INT32_MAX;
}

/* Every check m3idx_index_topk_decode (no work map) or _prefill, by
 * batch->mode, makes of its host arguments, in a context whose limits are
 * the batch's own: for libm3idx_mpi, which splits the call over contexts
 * it sizes itself.  The message goes to m3idx_last_error(NULL). */
m3idx_status m3idx__check_index_topk(const m3idx_batch *batch, const m3idx_query *query,
                                     const m3idx_kcache *kcache, int32_t init_blocks,
                                     int32_t local_blocks, const int32_t *topk,
                                     const float *scores, int64_t score_stride) {
  struct m3idx_context probe;
  m3idx__probe_context(&probe);
  struct m3idx_call c = {.stage = M3IDX_STAGE_FUSED};
  m3idx_status st = batch == NULL ? m3idx__fail(&probe, M3IDX_ERR_NULL_POINTER, "batch is NULL")
                                  : m3idx__check_batch(&probe, batch, 0, &c);
  if (st == M3IDX_OK)
    st = m3idx__check_query(&probe, query, &c);
  if (st == M3IDX_OK)
    st = m3idx__check_kcache(&probe, kcache, &c);
  if (st == M3IDX_OK)
    st = m3idx__check_forced(&probe, init_blocks, local_blocks, &c);
  if (st == M3IDX_OK)
    st = m3idx__check_topk(&probe, topk, &c);
  if (st == M3IDX_OK)
    st = m3idx__check_scores(&probe, scores, score_stride, 1, &c);
  if (st == M3IDX_OK) {
    c.scores = (float *)scores;
    st = m3idx__check_outputs_apart(&probe, &c);
  }
  return st == M3IDX_OK ? M3IDX_OK : m3idx__fail(NULL, st, "%s", probe.err.msg);
}
