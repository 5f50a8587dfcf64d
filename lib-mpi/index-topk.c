/*
 * index-topk.c - m3idx_mpi_index_topk: the fused call over a communicator.
 *
 * 1. The root checks the whole call with the library's own checks; every
 *    rank learns the verdict (agree.c), so bad input is refused everywhere
 *    with one message before any work.
 * 2. The root broadcasts the call's sizes and lengths; every rank computes
 *    the same plan (plan.c).
 * 3. The root sends each rank its share: the rows, block-table entries and
 *    pages it reads (share.c).  The root reads the inputs once and sends
 *    no rank a page it does not read.
 * 4. Each rank computes its share with the ordinary library; every rank
 *    learns whether all did.
 * 5. The ranks send their results to the root, which writes the outputs:
 *    rows in place, block ranges merged by m3idx_merge_topk.  The outputs
 *    are written only once every rank has succeeded.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "call-checks.h"
#include "compute-share.h"
#include "plan.h"
#include "share.h"
#include "work-map.h"

void m3idx_mpi_options_init(m3idx_mpi_options *opts) {
  memset(opts, 0, sizeof *opts);
  opts->size = sizeof *opts;
  m3idx_options_init(&opts->context);
  opts->root = 0;
  opts->split = M3IDX_MPI_SPLIT_AUTO;
}

/* The call's sizes and options, at the root. */
static void head_of(const m3idx_mpi_options *o, const m3idx_batch *b, const m3idx_query *q,
                    const m3idx_kcache *k, int32_t init, int32_t local, const float *scores,
                    int64_t stride, struct call_head *h) {
  memset(h, 0, sizeof *h);
  h->mode = b->mode;
  h->num_reqs = b->num_reqs;
  h->num_heads = b->num_heads;
  h->num_rows = b->num_rows;
  h->max_seq_len = b->max_seq_len;
  h->query_len = b->mode == M3IDX_MODE_DECODE ? b->query_len : 1;
  h->dtype = q->dtype;
  h->scale = q->scale;
  h->init_blocks = init;
  h->local_blocks = local;
  h->split = o->split;
  h->want_scores = scores != NULL;
  h->bt_stride = k->bt_stride;
  h->score_stride = stride;
}

/* Step 3: the root builds and sends every share, keeping its own. */
static m3idx_status send_shares(MPI_Comm c, int root, int ranks, const struct call_head *h,
                                const struct call_inputs_g *g, struct package *own) {
  m3idx_status st = M3IDX_OK;
  for (int k = 0; k < ranks; k++) {
    struct share s;
    struct package p = {0};
    if (plan_share(h, g->seq_lens, g->cu, g->ctx, ranks, k, &s) != 0 ||
        package_build(h, g, &s, k == root, &p) != 0) {
      /* The rank gets an empty share, and the root's failure stops all. */
      st = agree_fail(M3IDX_ERR_NO_MEMORY, "no memory for rank %d's share", k);
      p = (struct package){0};
    }
    plan_share_free(&s);
    if (k == root) {
      *own = p;
      continue;
    }
    const int e = package_send(c, k, h, &p);
    package_free(&p);
    if (e != 0 && st == M3IDX_OK)
      st = agree_mpi_failed("sending a share", e);
  }
  return st;
}

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

/* A result's arrays, sent or received in one order. */
static int result_transfer(MPI_Comm c, int peer, int sending, const struct call_head *h,
                           const struct share *s, struct share_result *r) {
  int32_t dims[2] = {r->rows, r->width};
  int e = sending ? send_bytes(c, peer, dims, sizeof dims) : recv_bytes(c, peer, dims, sizeof dims);
  if (e != 0)
    return e;
  if (!sending) {
    r->rows = dims[0], r->width = dims[1];
    const size_t pairs = (size_t)h->num_heads * (size_t)r->rows;
    const size_t lists = (size_t)h->num_heads * (size_t)h->num_rows * M3IDX_TOPK;
    const int scores = h->want_scores;
    r->topk = s->blocks ? NULL : malloc(4 * pairs * M3IDX_TOPK + 1);
    r->ids = s->blocks ? malloc(4 * lists + 1) : NULL;
    r->vals = s->blocks ? malloc(4 * lists + 1) : NULL;
    r->scores = scores ? malloc(4 * pairs * (size_t)r->width + 1) : NULL;
    if ((!s->blocks && !r->topk) || (s->blocks && (!r->ids || !r->vals)) ||
        (scores && !r->scores))
      return -1;
  }
  const int64_t pairs = (int64_t)h->num_heads * r->rows;
  const int64_t lists = (int64_t)h->num_heads * h->num_rows * M3IDX_TOPK;
  struct {
    void *p;
    int64_t n;
  } parts[4] = {{r->topk, s->blocks ? 0 : 4 * pairs * M3IDX_TOPK},
                {r->ids, s->blocks ? 4 * lists : 0},
                {r->vals, s->blocks ? 4 * lists : 0},
                {r->scores, h->want_scores ? 4 * pairs * r->width : 0}};
  for (int i = 0; i < 4 && e == 0; i++)
    if (parts[i].n > 0)
      e = sending ? send_bytes(c, peer, parts[i].p, parts[i].n)
                  : recv_bytes(c, peer, parts[i].p, parts[i].n);
  return e;
}

/* Steps 4 and 5 at the root, after every rank succeeded: the results in
 * rank order, then the merge of a block split. */
static m3idx_status gather(MPI_Comm c, int root, int ranks, const struct call_head *h,
                           const int32_t *sl, const int32_t *cu, const int32_t *ctx,
                           struct share_result *own, int32_t *topk, float *scores) {
  const int64_t lists = (int64_t)h->num_heads * h->num_rows * M3IDX_TOPK;
  const int32_t **ids = calloc((size_t)ranks, sizeof *ids);
  const float **vals = calloc((size_t)ranks, sizeof *vals);
  struct share_result *got = calloc((size_t)ranks, sizeof *got);
  m3idx_status st = ids && vals && got ? M3IDX_OK
                                       : agree_fail(M3IDX_ERR_NO_MEMORY, "no memory to gather");
  int blocks = 0;
  for (int k = 0; k < ranks; k++) {
    struct share s;
    if (plan_share(h, sl, cu, ctx, ranks, k, &s) != 0) {
      st = agree_fail(M3IDX_ERR_NO_MEMORY, "no memory to gather");
      continue;
    }
    blocks = s.blocks;
    struct share_result *r = k == root ? own : &got[k];
    if (k != root) {
      const int e = result_transfer(c, k, 0, h, &s, r);
      if (e != 0 && st == M3IDX_OK)
        st = e < 0 ? agree_fail(M3IDX_ERR_NO_MEMORY, "no memory for rank %d's results", k)
                   : agree_mpi_failed("receiving a result", e);
    }
    if (st == M3IDX_OK)
      place(h, &s, sl, cu, ctx, r, topk, scores);
    if (ids && vals) {
      ids[k] = r->ids;
      vals[k] = r->vals;
    }
    plan_share_free(&s);
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

m3idx_status m3idx_mpi_index_topk(MPI_Comm comm, const m3idx_mpi_options *opts,
                                  const m3idx_batch *batch, const m3idx_query *query,
                                  const m3idx_kcache *kcache, int32_t init_blocks,
                                  int32_t local_blocks, int32_t *topk, float *scores,
                                  int64_t score_stride) {
  m3idx_mpi_options o;
  m3idx_mpi_options_init(&o);
  if (opts != NULL && opts->size != sizeof o)
    return agree_fail(M3IDX_ERR_OPTIONS, "opts->size is %zu, not sizeof(m3idx_mpi_options) %zu",
                      opts->size, sizeof o);
  if (opts != NULL)
    o = *opts;
  int ready = 0, rank = 0, ranks = 1;
  if (MPI_Initialized(&ready) != MPI_SUCCESS || !ready)
    return agree_fail(M3IDX_ERR_UNSUPPORTED, "MPI is not initialised (MPI_Init first)");
  MPI_Comm c;
  int e = MPI_Comm_dup(comm, &c);
  if (e != MPI_SUCCESS)
    return agree_mpi_failed("MPI_Comm_dup", e);
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  MPI_Comm_rank(c, &rank);
  MPI_Comm_size(c, &ranks);
  m3idx_status st = M3IDX_OK;
  if (o.root < 0 || o.root >= ranks)
    st = agree_fail(M3IDX_ERR_INVALID_ARGUMENT, "opts->root is %d, not a rank of the %d",
                    (int)o.root, ranks);
  else if (o.split != M3IDX_MPI_SPLIT_AUTO && o.split != M3IDX_MPI_SPLIT_ROWS &&
           o.split != M3IDX_MPI_SPLIT_BLOCKS)
    st = agree_fail(M3IDX_ERR_INVALID_ARGUMENT, "opts->split is %d, not a m3idx_mpi_split",
                    (int)o.split);
  else if (o.inputs != M3IDX_MPI_INPUTS_ROOT && o.inputs != M3IDX_MPI_INPUTS_EVERY_RANK)
    st = agree_fail(M3IDX_ERR_INVALID_ARGUMENT, "opts->inputs is %d, not a m3idx_mpi_inputs",
                    (int)o.inputs);
  else if (o.inputs == M3IDX_MPI_INPUTS_EVERY_RANK && rank != o.root &&
           (batch == NULL || query == NULL || kcache == NULL))
    st = agree_fail(M3IDX_ERR_NULL_POINTER,
                    "%s is NULL: with M3IDX_MPI_INPUTS_EVERY_RANK every rank passes the inputs",
                    batch == NULL ? "batch" : query == NULL ? "query" : "kcache");
  const int root = st == M3IDX_OK ? o.root : 0;
  /* 1. The root checks the call. */
  if (st == M3IDX_OK && rank == root) {
    st = m3idx__check_index_topk(batch, query, kcache, init_blocks, local_blocks, topk, scores,
                                 score_stride);
    if (st != M3IDX_OK)
      agree_fail(st, "%s", m3idx_last_error(NULL));
  }
  st = agree(c, st);
  struct call_head h;
  int32_t *sl = NULL, *cu = NULL, *cx = NULL;
  struct package own = {0};
  struct share mine = {0};
  struct share_result res = {0};
  int32_t *out_topk = NULL; /* the root's outputs, copied out once all succeeded */
  float *out_scores = NULL;
  if (st != M3IDX_OK)
    goto done;
  /* 2. Sizes and lengths. */
  if (rank == root)
    head_of(&o, batch, query, kcache, init_blocks, local_blocks, scores, score_stride, &h);
  e = MPI_Bcast(&h, (int)sizeof h, MPI_BYTE, root, c);
  if (e == MPI_SUCCESS) {
    sl = malloc(4 * (size_t)h.num_reqs + 4);
    cu = malloc(4 * (size_t)h.num_reqs + 8);
    cx = malloc(4 * (size_t)h.num_reqs + 4);
  }
  const int prefill = h.mode == M3IDX_MODE_PREFILL;
  if (e == MPI_SUCCESS && sl && cu && cx) {
    if (rank == root) {
      memcpy(sl, batch->seq_lens, 4 * (size_t)h.num_reqs);
      if (prefill) {
        memcpy(cu, batch->cu_seqlens_q, 4 * (size_t)h.num_reqs + 4);
        memcpy(cx, batch->context_lens, 4 * (size_t)h.num_reqs);
      }
    }
    e = MPI_Bcast(sl, h.num_reqs, MPI_INT32_T, root, c);
    if (e == MPI_SUCCESS && prefill)
      e = MPI_Bcast(cu, h.num_reqs + 1, MPI_INT32_T, root, c);
    if (e == MPI_SUCCESS && prefill)
      e = MPI_Bcast(cx, h.num_reqs, MPI_INT32_T, root, c);
  }
  if (e != MPI_SUCCESS)
    st = agree_mpi_failed("MPI_Bcast (the call's sizes and lengths)", e);
  else if (!sl || !cu || !cx || plan_share(&h, sl, cu, cx, ranks, rank, &mine) != 0)
    st = agree_fail(M3IDX_ERR_NO_MEMORY, "no memory for the call's lengths");
  st = agree(c, st);
  if (st != M3IDX_OK)
    goto done;
  /* 3. The shares. */
  const struct call_inputs_g g = {sl, cu, cx, kcache ? kcache->block_table : NULL,
                                  kcache ? kcache->pages : NULL,
                                  query ? (const uint8_t *)query->data : NULL,
                                  kcache ? kcache->num_pages : 0};
  if (o.inputs == M3IDX_MPI_INPUTS_EVERY_RANK) {
    if (package_build(&h, &g, &mine, 1, &own) != 0)
      st = agree_fail(M3IDX_ERR_NO_MEMORY, "no memory for its share");
  } else if (rank == root) {
    st = send_shares(c, root, ranks, &h, &g, &own);
  } else {
    e = package_recv(c, root, &h, &own);
    if (e != 0)
      st = e < 0 ? agree_fail(M3IDX_ERR_NO_MEMORY, "no memory for its share")
                 : agree_mpi_failed("receiving its share", e);
  }
  /* 4. Each share computed, and the verdict shared. */
  if (st == M3IDX_OK)
    st = compute_share(&h, &o.context, &mine, &own, sl, &res);
  st = agree(c, st);
  if (st != M3IDX_OK)
    goto done;
  /* 5. The results at the root, into copies of its outputs. */
  if (rank == root) {
    const size_t pairs = (size_t)h.num_heads * (size_t)h.num_rows;
    const size_t score_count = pairs > 0 ? (pairs - 1) * (size_t)h.score_stride +
                                               (size_t)m3idx__blocks_of(h.max_seq_len)
                                         : 0;
    out_topk = malloc(4 * pairs * M3IDX_TOPK + 1);
    out_scores = scores ? malloc(4 * score_count + 1) : NULL;
    if (out_topk == NULL || (scores && out_scores == NULL))
      st = agree_fail(M3IDX_ERR_NO_MEMORY, "no memory for the outputs' copies");
    if (st == M3IDX_OK && scores)
      memcpy(out_scores, scores, 4 * score_count);
    if (st == M3IDX_OK)
      st = gather(c, root, ranks, &h, sl, cu, cx, &res, out_topk, out_scores);
  } else {
    e = result_transfer(c, root, 1, &h, &mine, &res);
    if (e != 0)
      st = agree_mpi_failed("sending its result", e);
  }
  /* The outputs only once every rank knows that every rank succeeded. */
  st = agree(c, st);
  if (st == M3IDX_OK && rank == root) {
    const size_t pairs = (size_t)h.num_heads * (size_t)h.num_rows;
    memcpy(topk, out_topk, 4 * pairs * M3IDX_TOPK);
    if (scores)
      memcpy(scores, out_scores,
             4 * (pairs > 0 ? (pairs - 1) * (size_t)h.score_stride +
                                  (size_t)m3idx__blocks_of(h.max_seq_len)
                            : 0));
  }
done:
  free(out_topk);
  free(out_scores);
  share_result_free(&res);
  package_free(&own);
  plan_share_free(&mine);
  free(sl);
  free(cu);
  free(cx);
  MPI_Comm_free(&c);
  return st;
}
