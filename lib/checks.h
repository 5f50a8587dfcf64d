/*
 * checks.h - the argument checks every entry point runs before it writes.
 *
 * Each check fills its part of the call and returns M3IDX_OK, or records a
 * message naming the argument on ctx and returns the status.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_CHECKS_H
#define M3IDX_CHECKS_H

#include "context.h"

/* want_mode: M3IDX_MODE_DECODE, M3IDX_MODE_PREFILL, or 0 for either. */
m3idx_status m3idx__check_batch(m3idx_context *ctx, const m3idx_batch *batch,
                                int want_mode, struct m3idx_call *call);
m3idx_status m3idx__check_query(m3idx_context *ctx, const m3idx_query *query,
                                struct m3idx_call *call);
m3idx_status m3idx__check_kcache(m3idx_context *ctx, const m3idx_kcache *kcache,
                                 struct m3idx_call *call);
m3idx_status m3idx__check_forced(m3idx_context *ctx, int32_t init_blocks,
                                 int32_t local_blocks, struct m3idx_call *call);
/* optional: NULL scores are allowed (fused calls). */
m3idx_status m3idx__check_scores(m3idx_context *ctx, const void *scores,
                                 int64_t score_stride, int optional,
                                 struct m3idx_call *call);
m3idx_status m3idx__check_topk(m3idx_context *ctx, const int32_t *topk,
                               struct m3idx_call *call);
/* building: the map is the output (m3idx_work_map_build). */
m3idx_status m3idx__check_work_map(m3idx_context *ctx, const int32_t *map,
                                   int32_t capacity, int building,
                                   struct m3idx_call *call);

/* Every output of the call (topk, scores, the work map being built) lies
 * apart from every input and from the other outputs, by address (SPEC
 * section 11): M3IDX_ERR_INVALID_ARGUMENT naming both.  Run last, on the
 * filled call. */
m3idx_status m3idx__check_outputs_apart(m3idx_context *ctx, const struct m3idx_call *call);

#endif /* M3IDX_CHECKS_H */
