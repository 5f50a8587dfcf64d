/*
 * call-setup.h - the first steps of every collective call of libm3idx_mpi:
 * the options, the root's check of the call, the sizes and lengths every
 * rank learns, the plan, and each rank's share of the inputs.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_MPI_CALL_SETUP_H
#define M3IDX_MPI_CALL_SETUP_H

#include "share.h"

struct call_setup {
  MPI_Comm c; /* comm's duplicate, errors returned */
  int rank, ranks, root;
  m3idx_mpi_options o;
  struct call_head h;
  int32_t *sl, *cu, *cx; /* the batch's lengths, on every rank */
  int32_t *bound;        /* plan_bounds' [ranks + 1] */
  struct share mine;
  struct package own;
};

/* Collective: check the options, have the root run check(check_arg)
 * (M3IDX_OK, or its status with m3idx_last_error(NULL) saying why),
 * broadcast the call's sizes and lengths, plan, and give every rank its
 * share (rows_only: a row split whatever opts->split says).  M3IDX_OK on
 * every rank, or the same status and message on every rank with nothing
 * left to free. */
m3idx_status call_setup(MPI_Comm comm, const m3idx_mpi_options *opts, const m3idx_batch *batch,
                        const m3idx_query *query, const m3idx_kcache *kcache,
                        int32_t init_blocks, int32_t local_blocks, int want_scores,
                        int64_t score_stride, int rows_only,
                        m3idx_status (*check)(const void *arg), const void *check_arg,
                        struct call_setup *cs);
void call_setup_free(struct call_setup *cs);

#endif
