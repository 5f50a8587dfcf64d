/*
 * index-topk.c - m3idx_mpi_index_topk: the fused call over a communicator.
 *
 * After call_setup (the root's check, the plan, the shares):
 * 4. each rank computes its share with the ordinary library, and every
 *    rank learns whether all did;
 * 5. the ranks send their results to the root, which writes the outputs:
 *    rows in place, block ranges merged by m3idx_merge_topk.  The outputs
 *    are written only once every rank knows that every rank succeeded.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "call-checks.h"
#include "call-setup.h"
#include "compute-share.h"
#include "work-map.h"


/* Step 5 at the root: rank k's result into the outputs (rows), or its
 * scores into scores (blocks: its sub-requests are the requests whose
 * range is not empty, in order; their lists go to the merge). */
static void place(const struct call_head *h, const struct share *s, const int32_t *seq_lens,
                  const int32_t *cu, const int32_t *ctx, const struct share_result *r,
                  int32_t *topk, float *scores) {
  const int64_t H = h->num_heads, R = h->num_rows;
  if (!s->blocks) {
    for (int64_t hd = 0; hd < H; hd++)
      for (int32_t i = 0; i < r->rows; i++) {
        const int32_t row = s->row0 + i;
        memcpy(topk + (hd * R + row) * M3IDX_TOPK, r->topk + (hd * r->rows + i) * M3IDX_TOPK,
               sizeof(int32_t) * M3IDX_TOPK);
        if (scores != NULL)
          memcpy(scores + (hd * R + row) * h->score_stride,
                 r->scores + (hd * r->rows + i) * r->width,
                 sizeof(float) * (size_t)plan_row_blocks(h, seq_lens, cu, ctx, row));
      }
    return;
  }
  if (scores == NULL)
    return;
  const int32_t q = h->query_len;
  for (int32_t req = 0, i = 0; req < h->num_reqs; req++) {
    if (s->lo[req] >= s->hi[req])
      continue;
    for (int32_t j = 0; j < q; j++) {
      const int32_t row = req * q + j, n = plan_row_blocks(h, seq_lens, cu, ctx, row);
      const int32_t end = s->hi[req] < n ? s->hi[req] : n;
      for (int64_t hd = 0; hd < H && end > s->lo[req]; hd++)
        memcpy(scores + (hd * R + row) * h->score_stride + s->lo[req],
               r->scores + (hd * r->rows + i * q + j) * r->width,
               sizeof(float) * (size_t)(end - s->lo[req]));
    }
    i++;
  }
}

/* A result's arrays, sent or received in one order.  After the sizes the
 * root says whether it takes them (room: it is still going and has the
 * memory), so that no rank waits on a send the root will not receive.
 * 0, -1 when the root takes nothing (no memory, or it failed already), or
 * the MPI error. */
static int result_transfer(MPI_Comm c, int peer, int sending, int room_ok,
                           const struct call_head *h, int blocks, struct share_result *r) {
  int32_t dims[2] = {r->rows, r->width}, room = 0;
  int e = sending ? send_bytes(c, peer, dims, sizeof dims) : recv_bytes(c, peer, dims, sizeof dims);
  if (e == 0 && !sending) {
    r->rows = dims[0], r->width = dims[1];
    const size_t pairs = (size_t)h->num_heads * (size_t)r->rows;
    const size_t lists = (size_t)h->num_heads * (size_t)h->num_rows * M3IDX_TOPK;
    if (room_ok) {
      r->topk = blocks ? NULL : malloc(4 * pairs * M3IDX_TOPK + 1);
      r->ids = blocks ? malloc(4 * lists + 1) : NULL;
      r->vals = blocks ? malloc(4 * lists + 1) : NULL;
      r->scores = h->want_scores ? malloc(4 * pairs * (size_t)r->width + 1) : NULL;
      room = (blocks || r->topk) && (!blocks || (r->ids && r->vals)) &&
             (!h->want_scores || r->scores);
    }
    e = send_bytes(c, peer, &room, sizeof room);
  } else if (e == 0) {
    e = recv_bytes(c, peer, &room, sizeof room);
  }
  if (e != 0 || !room)
    return e != 0 ? e : -1;
  const int64_t pairs = (int64_t)h->num_heads * r->rows;
  const int64_t lists = (int64_t)h->num_heads * h->num_rows * M3IDX_TOPK;
  struct {
    void *p;
    int64_t n;
  } parts[4] = {{r->topk, blocks ? 0 : 4 * pairs * M3IDX_TOPK},
                {r->ids, blocks ? 4 * lists : 0},
                {r->vals, blocks ? 4 * lists : 0},
                {r->scores, h->want_scores ? 4 * pairs * r->width : 0}};
  for (int i = 0; i < 4 && e == 0; i++)
    if (parts[i].n > 0)
      e = sending ? send_bytes(c, peer, parts[i].p, parts[i].n)
                  : recv_bytes(c, peer, parts[i].p, parts[i].n);
  return e;
}

/* Step 5 at the root, after every rank succeeded: the results in rank
 * order (every rank's, even after a failure, so that none waits), then
 * the merge of a block split. */
static m3idx_status gather(MPI_Comm c, int root, int ranks, const struct call_head *h,
                           const int32_t *sl, const int32_t *cu, const int32_t *ctx,
                           const int32_t *bound, struct share_result *own, int32_t *topk,
                           float *scores) {
  const int64_t lists = (int64_t)h->num_heads * h->num_rows * M3IDX_TOPK;
  const int blocks = plan_split(h, sl, ranks) == M3IDX_MPI_SPLIT_BLOCKS;
  const int32_t **ids = calloc((size_t)ranks, sizeof *ids);
  const float **vals = calloc((size_t)ranks, sizeof *vals);
  struct share_result *got = calloc((size_t)ranks, sizeof *got);
  m3idx_status st = ids && vals && got ? M3IDX_OK
                                       : agree_fail(M3IDX_ERR_NO_MEMORY, "no memory to gather");
  for (int k = 0; k < ranks; k++) {
    struct share_result none = {0};
    struct share_result *r = k == root ? own : got ? &got[k] : &none;
    if (k != root) {
      const int e = result_transfer(c, k, 0, st == M3IDX_OK, h, blocks, r);
      if (e != 0 && st == M3IDX_OK)
        st = e < 0 ? agree_fail(M3IDX_ERR_NO_MEMORY, "no memory for rank %d's results", k)
                   : agree_mpi_failed("receiving a result", e);
    }
    struct share s;
    if (st == M3IDX_OK && plan_share(h, sl, bound, ranks, k, &s) != 0)
      st = agree_fail(M3IDX_ERR_NO_MEMORY, "no memory to gather");
    else if (st == M3IDX_OK) {
      place(h, &s, sl, cu, ctx, r, topk, scores);
      plan_share_free(&s);
    }
    if (ids && vals) {
      ids[k] = r->ids;
      vals[k] = r->vals;
    }
    share_result_free(&none);
  }
  if (st == M3IDX_OK && blocks && m3idx_merge_topk(lists / M3IDX_TOPK, ranks, ids, vals, topk,
                                                   NULL) != M3IDX_OK)
    st = agree_fail(M3IDX_ERR_NO_MEMORY, "merging the ranks' lists: %s", m3idx_last_error(NULL));
  for (int k = 0; got && k < ranks; k++)
    share_result_free(&got[k]);
  free(got);
  free(ids);
  free(vals);
  return st;
}

/* The root's check of the call (call_setup). */
struct topk_call {
  const m3idx_batch *batch;
  const m3idx_query *query;
  const m3idx_kcache *kcache;
  int32_t init_blocks, local_blocks;
  const int32_t *topk;
  const float *scores;
  int64_t score_stride;
};

static m3idx_status check_topk(const void *arg) {
  const struct topk_call *t = arg;
  return m3idx__check_index_topk(t->batch, t->query, t->kcache, t->init_blocks, t->local_blocks,
                                 t->topk, t->scores, t->score_stride);
}

m3idx_status m3idx_mpi_index_topk(MPI_Comm comm, const m3idx_mpi_options *opts,
                                  const m3idx_batch *batch, const m3idx_query *query,
                                  const m3idx_kcache *kcache, int32_t init_blocks,
                                  int32_t local_blocks, int32_t *topk, float *scores,
                                  int64_t score_stride) {
  const struct topk_call t = {batch, query, kcache, init_blocks, local_blocks, topk, scores,
                              score_stride};
  struct call_setup cs;
  m3idx_status st = call_setup(comm, opts, batch, query, kcache, init_blocks, local_blocks,
                               scores != NULL, score_stride, 0, check_topk, &t, &cs);
  if (st != M3IDX_OK)
    return st;
  const struct call_head *h = &cs.h;
  struct share_result res = {0};
  int32_t *out_topk = NULL; /* the root's outputs, copied out once all succeeded */
  float *out_scores = NULL;
  const size_t pairs = (size_t)h->num_heads * (size_t)h->num_rows;
  const size_t score_count =
      pairs > 0 ? (pairs - 1) * (size_t)h->score_stride + (size_t)m3idx__blocks_of(h->max_seq_len)
                : 0;
  /* 4. Each share computed, and the verdict shared. */
  st = agree(cs.c, compute_share(h, &cs.o.context, &cs.mine, &cs.own, cs.sl, &res));
  if (st != M3IDX_OK)
    goto done;
  /* 5. The results at the root, into copies of its outputs. */
  if (cs.rank == cs.root) {
    out_topk = malloc(4 * pairs * M3IDX_TOPK + 1);
    out_scores = scores ? malloc(4 * score_count + 1) : NULL;
    if (out_topk == NULL || (scores && out_scores == NULL))
      st = agree_fail(M3IDX_ERR_NO_MEMORY, "no memory for the outputs' copies");
    if (st == M3IDX_OK && scores)
      memcpy(out_scores, scores, 4 * score_count);
    if (st == M3IDX_OK)
      st = gather(cs.c, cs.root, cs.ranks, h, cs.sl, cs.cu, cs.cx, cs.bound, &res, out_topk,
                  out_scores);
  } else {
    const int e = result_transfer(cs.c, cs.root, 1, 1, h, cs.mine.blocks, &res);
    if (e != 0)
      st = e < 0 ? agree_fail(M3IDX_ERR_NO_MEMORY, "the root could not take its result")
                 : agree_mpi_failed("sending its result", e);
  }
  /* The outputs only once every rank knows that every rank succeeded. */
  st = agree(cs.c, st);
  if (st == M3IDX_OK && cs.rank == cs.root) {
    memcpy(topk, out_topk, 4 * pairs * M3IDX_TOPK);
    if (scores)
      memcpy(scores, out_scores, 4 * score_count);
  }
done:
  free(out_topk);
  free(out_scores);
  share_result_free(&res);
  call_setup_free(&cs);
  return st;
}
