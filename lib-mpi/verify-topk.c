/*
 * verify-topk.c - m3idx_mpi_verify_topk: m3idx_verify_topk over a
 * communicator.  A row's verdict depends on that row alone, so the rows
 * are split by cost (call_setup), each rank verifies its rows' candidate
 * with the ordinary library, and the root places the verdicts and adds
 * the summaries (the largest deviation is the largest of the ranks').
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "call-checks.h"
#include "call-setup.h"
#include "compute-share.h"
#include "work-map.h"

struct verify_call {
  const m3idx_batch *batch;
  const m3idx_query *query;
  const m3idx_kcache *kcache;
  int32_t init_blocks, local_blocks;
  const int32_t *candidate;
  const float *scores;
  int64_t score_stride;
  const m3idx_verify_options *opts;
};

static m3idx_status check_verify(const void *arg) {
  const struct verify_call *v = arg;
  return m3idx__check_verify_topk(v->batch, v->query, v->kcache, v->init_blocks, v->local_blocks,
                                  v->candidate, v->scores, v->score_stride, v->opts);
}

/* The candidate's rows [row0, row0 + rows) of every head: ids [H, rows,
 * 16] and scores [H, rows, width] (when given, stride the caller's). */
static void slice(const struct call_head *h, const int32_t *cand, const float *scores,
                  int64_t stride, int32_t row0, int32_t rows, int32_t width, int32_t *ids_out,
                  float *scores_out) {
  for (int64_t hd = 0; hd < h->num_heads; hd++) {
    memcpy(ids_out + hd * rows * M3IDX_TOPK, cand + (hd * h->num_rows + row0) * M3IDX_TOPK,
           sizeof(int32_t) * (size_t)rows * M3IDX_TOPK);
    for (int32_t i = 0; scores != NULL && i < rows; i++)
      memcpy(scores_out + (hd * rows + i) * width, scores + (hd * h->num_rows + row0 + i) * stride,
             sizeof(float) * (size_t)width);
  }
}

/* This rank's rows verified: verdicts [H, rows] and their summary. */
static m3idx_status verify_share(const struct call_setup *cs, const m3idx_verify_options *vo,
                                 const int32_t *ids, const float *scores,
                                 m3idx_verify_row *verdicts, m3idx_verify_summary *sum) {
  const struct call_head *h = &cs->h;
  const struct package *p = &cs->own;
  memset(sum, 0, sizeof *sum);
  if (p->num_reqs == 0)
    return M3IDX_OK;
  m3idx_context *ctx = NULL;
  m3idx_batch b;
  m3idx_query q;
  m3idx_kcache kc;
  m3idx_status st = share_context(h, &cs->o.context, p, &ctx, &b, &q, &kc);
  if (st != M3IDX_OK)
    return st;
  st = m3idx_verify_topk(ctx, &b, &q, &kc, h->init_blocks, h->local_blocks, ids, scores,
                         scores ? (int64_t)m3idx__blocks_of(p->max_seq_len) : 0, vo, verdicts,
                         sum);
  if (st != M3IDX_OK)
    st = agree_fail(st, "its rows: %s", m3idx_last_error(ctx));
  m3idx_context_destroy(ctx);
  return st;
}

/* Rank k's summary, then (when the root says it takes them: room_ok at
 * the root) its verdicts, sent to the root or received there: 0, -1 when
 * the root takes nothing, or the MPI error. */
static int transfer(MPI_Comm c, int peer, int sending, int room_ok, int64_t pairs,
                    m3idx_verify_row *verdicts, m3idx_verify_summary *sum) {
  int32_t room = room_ok;
  int e = sending ? send_bytes(c, peer, sum, sizeof *sum) : recv_bytes(c, peer, sum, sizeof *sum);
  if (e == 0)
    e = sending ? recv_bytes(c, peer, &room, sizeof room) : send_bytes(c, peer, &room, sizeof room);
  if (e != 0 || !room)
    return e != 0 ? e : -1;
  if (pairs > 0)
    e = sending ? send_bytes(c, peer, verdicts, pairs * (int64_t)sizeof *verdicts)
                : recv_bytes(c, peer, verdicts, pairs * (int64_t)sizeof *verdicts);
  return e;
}

/* The width of the batch of rows [row0, row1): their most causal blocks. */
static int32_t rows_width(const struct call_setup *cs, int32_t row0, int32_t row1) {
  int32_t width = 0;
  for (int32_t i = row0; i < row1; i++) {
    const int32_t w = plan_row_blocks(&cs->h, cs->sl, cs->cu, cs->cx, i);
    width = w > width ? w : width;
  }
  return width;
}

m3idx_status m3idx_mpi_verify_topk(MPI_Comm comm, const m3idx_mpi_options *opts,
                                   const m3idx_batch *batch, const m3idx_query *query,
                                   const m3idx_kcache *kcache, int32_t init_blocks,
                                   int32_t local_blocks, const int32_t *candidate,
                                   const float *candidate_scores, int64_t score_stride,
                                   const m3idx_verify_options *vopts, m3idx_verify_row *rows,
                                   m3idx_verify_summary *summary) {
  const struct verify_call v = {batch, query, kcache, init_blocks, local_blocks, candidate,
                                candidate_scores, score_stride, vopts};
  struct call_setup cs;
  m3idx_status st = call_setup(comm, opts, batch, query, kcache, init_blocks, local_blocks,
                               candidate_scores != NULL, score_stride, 1, check_verify, &v, &cs);
  if (st != M3IDX_OK)
    return st;
  const struct call_head *h = &cs.h;
  const int everywhere = cs.o.inputs == M3IDX_MPI_INPUTS_EVERY_RANK;
  /* The root's options on every rank; a decode work map is the whole
     batch's, so the shares build their own. */
  m3idx_verify_options vo;
  m3idx_verify_options_init(&vo);
  if (cs.rank == cs.root && vopts != NULL)
    vo = *vopts;
  int e = MPI_Bcast(&vo, (int)sizeof vo, MPI_BYTE, cs.root, cs.c);
  vo.work_map = NULL;
  vo.work_map_capacity = 0;
  const int64_t stride = h->score_stride > 0 ? h->score_stride : m3idx__blocks_of(h->max_seq_len);
  /* The candidate's rows of each share. */
  const int32_t rows_k = cs.mine.row1 - cs.mine.row0;
  const int32_t width_k = cs.own.num_reqs > 0 ? (int32_t)m3idx__blocks_of(cs.own.max_seq_len) : 0;
  const int64_t pairs_k = (int64_t)h->num_heads * rows_k;
  int32_t *ids = malloc(sizeof(int32_t) * (size_t)pairs_k * M3IDX_TOPK + 1);
  float *sc = h->want_scores ? malloc(sizeof(float) * (size_t)(pairs_k * width_k) + 1) : NULL;
  m3idx_verify_row *verdicts = malloc(sizeof *verdicts * (size_t)pairs_k + 1);
  /* The root's room for any rank's slice, taken before the agreement
     below, so that once it holds nothing but MPI can fail. */
  int32_t *kids = NULL;
  float *ksc = NULL;
  const int send = !everywhere;
  if (send && cs.rank == cs.root) {
    int64_t most = 0, most_scores = 0;
    for (int k = 0; k < cs.ranks; k++) {
      int32_t row0, row1;
      plan_rows(h, cs.bound, k, &row0, &row1);
      const int64_t pk = (int64_t)h->num_heads * (row1 - row0);
      const int64_t pks = pk * rows_width(&cs, row0, row1);
      most = pk > most ? pk : most;
      most_scores = pks > most_scores ? pks : most_scores;
    }
    kids = malloc(sizeof(int32_t) * (size_t)most * M3IDX_TOPK + 1);
    ksc = h->want_scores ? malloc(sizeof(float) * (size_t)most_scores + 1) : NULL;
    if (kids == NULL || (h->want_scores && ksc == NULL))
      st = agree_fail(M3IDX_ERR_NO_MEMORY, "no memory for the ranks' candidates");
  }
  if (e != MPI_SUCCESS)
    st = agree_mpi_failed("MPI_Bcast (the verify options)", e);
  else if (ids == NULL || verdicts == NULL || (h->want_scores && sc == NULL))
    st = agree_fail(M3IDX_ERR_NO_MEMORY, "no memory for its rows' candidate");
  /* Every rank has room before the root sends (a send nobody receives
     would wait for ever). */
  st = agree(cs.c, st);
  if (st == M3IDX_OK && (everywhere || cs.rank == cs.root))
    slice(h, candidate, candidate_scores, stride, cs.mine.row0, rows_k, width_k, ids, sc);
  if (st == M3IDX_OK && send && cs.rank == cs.root) {
    for (int k = 0; k < cs.ranks && st == M3IDX_OK; k++) {
      int32_t row0, row1;
      plan_rows(h, cs.bound, k, &row0, &row1);
      if (k == cs.root)
        continue;
      const int32_t n = row1 - row0, width = rows_width(&cs, row0, row1);
      const int64_t pk = (int64_t)h->num_heads * n;
      slice(h, candidate, candidate_scores, stride, row0, n, width, kids, ksc);
      e = send_bytes(cs.c, k, kids, 4 * pk * M3IDX_TOPK);
      if (e == 0 && ksc)
        e = send_bytes(cs.c, k, ksc, 4 * pk * width);
      if (e != 0)
        st = agree_mpi_failed("sending a candidate", e);
    }
  } else if (st == M3IDX_OK && send && pairs_k > 0) {
    e = recv_bytes(cs.c, cs.root, ids, 4 * pairs_k * M3IDX_TOPK);
    if (e == 0 && sc)
      e = recv_bytes(cs.c, cs.root, sc, 4 * pairs_k * width_k);
    if (e != 0)
      st = agree_mpi_failed("receiving its candidate", e);
  }
  free(kids);
  free(ksc);
  m3idx_verify_summary mine;
  if (st == M3IDX_OK)
    st = verify_share(&cs, &vo, ids, sc, verdicts, &mine);
  st = agree(cs.c, st);
  m3idx_verify_row *all = NULL;
  m3idx_verify_summary total = {0};
  if (st == M3IDX_OK && cs.rank == cs.root) {
    const int64_t pairs = (int64_t)h->num_heads * h->num_rows;
    all = malloc(sizeof *all * (size_t)pairs + 1);
    m3idx_verify_row *got = malloc(sizeof *got * (size_t)pairs + 1);
    if (all == NULL || got == NULL)
      st = agree_fail(M3IDX_ERR_NO_MEMORY, "no memory for the verdicts");
    const int no_dev = (vo.flags & M3IDX_VERIFY_NO_MAX_DEVIATION) != 0;
    /* Every rank's, even after a failure, so that none waits. */
    for (int k = 0; k < cs.ranks; k++) {
      int32_t row0, row1;
      plan_rows(h, cs.bound, k, &row0, &row1);
      const int32_t n = row1 - row0;
      m3idx_verify_summary ks = mine;
      const m3idx_verify_row *kv = verdicts;
      if (k != cs.root) {
        e = transfer(cs.c, k, 0, st == M3IDX_OK, (int64_t)h->num_heads * n, got, &ks);
        if (e != 0 && st == M3IDX_OK)
          st = e < 0 ? agree_fail(M3IDX_ERR_NO_MEMORY, "no memory for the verdicts")
                     : agree_mpi_failed("receiving verdicts", e);
        kv = got;
      }
      if (st != M3IDX_OK)
        continue;
      for (int64_t hd = 0; hd < h->num_heads; hd++)
        memcpy(all + hd * h->num_rows + row0, kv + hd * n, sizeof *all * (size_t)n);
      total.rows += ks.rows;
      total.exact += ks.exact;
      total.equivalent += ks.equivalent;
      total.wrong += ks.wrong;
      if (!no_dev && ks.rows > 0 && ks.max_score_deviation > total.max_score_deviation)
        total.max_score_deviation = ks.max_score_deviation;
    }
    /* As one process: NaN when not computed, but 0 for a call of no rows. */
    if (no_dev && total.rows > 0)
      total.max_score_deviation = NAN;
    free(got);
  } else if (st == M3IDX_OK) {
    e = transfer(cs.c, cs.root, 1, 1, pairs_k, verdicts, &mine);
    if (e != 0)
      st = e < 0 ? agree_fail(M3IDX_ERR_NO_MEMORY, "the root could not take its verdicts")
                 : agree_mpi_failed("sending its verdicts", e);
  }
  st = agree(cs.c, st);
  if (st == M3IDX_OK && cs.rank == cs.root) {
    if (rows != NULL)
      memcpy(rows, all, sizeof *all * (size_t)((int64_t)h->num_heads * h->num_rows));
    if (summary != NULL)
      *summary = total;
  }
  free(all);
  free(ids);
  free(sc);
  free(verdicts);
  call_setup_free(&cs);
  return st;
}
