/*
 * compute-share.h - a rank's share computed with the ordinary library.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_MPI_COMPUTE_SHARE_H
#define M3IDX_MPI_COMPUTE_SHARE_H

#include "share.h"

/* What a share gives the root.  Rows: topk [H, rows, 16] and (when the
 * call wants scores) scores [H, rows, width] of the share's rows, as the
 * fused call writes them.  Blocks: lists ids and vals [H, num_rows, 16]
 * of every row of the call (its top-16 among the share's blocks by
 * pinned score, -1 and -inf after) and the pinned scores of the share's
 * rows and blocks, [H, rows, width], block lo of its request first. */
struct share_result {
  int32_t rows, width;
  int32_t *topk, *ids;
  float *scores, *vals;
};

/* M3IDX_OK, or the status with its message recorded (agree_fail). */
m3idx_status compute_share(const struct call_head *h, const m3idx_options *context,
                           const struct share *s, const struct package *p,
                           const int32_t *seq_lens, struct share_result *out);
void share_result_free(struct share_result *r);

/* A context sized for package p (this rank's context options, with host
 * pointers) and p's batch, query and kcache: M3IDX_OK, or the status
 * with its message recorded. */
m3idx_status share_context(const struct call_head *h, const m3idx_options *context,
                           const struct package *p, m3idx_context **ctx, m3idx_batch *b,
                           m3idx_query *q, m3idx_kcache *kc);

#endif
