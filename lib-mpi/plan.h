/*
 * plan.h - how a call's work is split over the ranks, computed by every
 * rank alike from the batch's lengths: whole rows (decode: whole
 * requests) by their cost, or each decode request's blocks.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_MPI_PLAN_H
#define M3IDX_MPI_PLAN_H

#include <stdint.h>

#include "m3idx_mpi.h"

/* What every rank knows of the call (the root broadcasts it). */
struct call_head {
  int32_t mode, num_reqs, num_heads, num_rows, max_seq_len, query_len;
  int32_t dtype, init_blocks, local_blocks, split, want_scores, bt_stride;
  float scale;
  int64_t score_stride;
};

/* Rank k's share.  Rows: global rows [row0, row1) (decode: of requests
 * [req0, req1)).  Blocks: of every request r, blocks [lo[r], hi[r]). */
struct share {
  int blocks;
  int32_t row0, row1, req0, req1;
  int32_t *lo, *hi; /* [num_reqs], blocks only */
};

/* The split to use: rows or blocks (M3IDX_MPI_SPLIT_ROWS / _BLOCKS). */
int plan_split(const struct call_head *h, const int32_t *seq_lens, int ranks);

/* The ranks' row ranges of a row split, in one pass over the rows:
 * bound [ranks + 1] receives the first item (decode: request; prefill:
 * row) of each rank's range, and the item count last. */
void plan_bounds(const struct call_head *h, const int32_t *seq_lens, const int32_t *cu,
                 const int32_t *ctx, int ranks, int32_t *bound);

/* Rank k's rows [*row0, *row1) in a row split, from plan_bounds' bound. */
void plan_rows(const struct call_head *h, const int32_t *bound, int k, int32_t *row0,
               int32_t *row1);

/* Rank k's share of the call, from plan_bounds' bound (lo and hi
 * allocated for a block split): 0, or -1 without memory. */
int plan_share(const struct call_head *h, const int32_t *seq_lens, const int32_t *bound,
               int ranks, int k, struct share *s);
void plan_share_free(struct share *s);

/* Causal blocks of global row i. */
int32_t plan_row_blocks(const struct call_head *h, const int32_t *seq_lens, const int32_t *cu,
                        const int32_t *ctx, int32_t i);

#endif
