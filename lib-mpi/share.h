/*
 * share.h - a rank's share of the inputs: the ordinary batch it computes
 * (its rows, or its block range of every request), the block-table
 * entries and query rows that batch reads, and only the pages it reads,
 * renumbered.  The root builds every rank's and sends it.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_MPI_SHARE_H
#define M3IDX_MPI_SHARE_H

#include <mpi.h>
#include <stdint.h>

#include "plan.h"

/* The root's inputs. */
struct call_inputs_g {
  const int32_t *seq_lens, *cu, *ctx, *bt;
  const uint8_t *pages, *query;
  int32_t num_pages;
};

/* A share's batch: num_reqs sub-requests (0: nothing to compute), each
 * from global request req_of[i]. */
struct package {
  int32_t num_reqs, num_rows, max_seq_len, bt_stride, num_pages;
  int32_t *seq_lens, *cu, *ctx, *bt, *req_of;
  uint8_t *pages, *query;
  int own_pages, own_query; /* the root's own arrays, not copies (not freed) */
};

/* Bytes of one query element. */
int query_elt(const struct call_head *h);

/* Rank share s's package from the root's inputs: 0, or -1 without memory.
 * borrow (the root's own share): the root's pages and page ids as they
 * are, and its query rows where they are contiguous, not copies. */
int package_build(const struct call_head *h, const struct call_inputs_g *g,
                  const struct share *s, int borrow, struct package *p);
/* 0, or the MPI error. */
int package_send(MPI_Comm comm, int dest, const struct call_head *h, const struct package *p);
/* 0, -1 without memory, or the MPI error. */
int package_recv(MPI_Comm comm, int src, const struct call_head *h, struct package *p);
void package_free(struct package *p);

/* Blocking byte transfers of any size (MPI counts are int). */
int send_bytes(MPI_Comm comm, int dest, const void *p, int64_t n);
int recv_bytes(MPI_Comm comm, int src, void *p, int64_t n);

#endif
