/*
 * call-setup.c - steps 1 to 3 of a collective call (call-setup.h):
 *
 * 1. The root checks the whole call with the library's own checks; every
 *    rank learns the verdict (agree.c), so bad input is refused everywhere
 *    with one message before any work.
 * 2. The root broadcasts the call's sizes and lengths; every rank computes
 *    the same plan (plan.c).
 * 3. The root sends each rank its share: the rows, block-table entries and
 *    pages it reads (share.c), so it reads the inputs once and sends no
 *    rank a page it does not read; or every rank takes its share of its
 *    own copy (M3IDX_MPI_INPUTS_EVERY_RANK).
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "call-setup.h"

void m3idx_mpi_options_init(m3idx_mpi_options *opts) {
  memset(opts, 0, sizeof *opts);
  opts->size = sizeof *opts;
  m3idx_options_init(&opts->context);
  opts->root = 0;
  opts->split = M3IDX_MPI_SPLIT_AUTO;
}

/* The call's sizes and options, at the root. */
static void head_of(const m3idx_mpi_options *o, const m3idx_batch *b, const m3idx_query *q,
                    const m3idx_kcache *k, int32_t init, int32_t local, int want_scores,
                    int64_t stride, int rows_only, struct call_head *h) {
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
  h->split = rows_only ? M3IDX_MPI_SPLIT_ROWS : o->split;
  h->want_scores = want_scores;
  h->bt_stride = k->bt_stride;
  h->score_stride = stride;
}

/* Step 3: the root builds and sends every share, keeping its own. */
static m3idx_status send_shares(MPI_Comm c, int root, int ranks, const struct call_head *h,
                                const struct call_inputs_g *g, const int32_t *bound,
                                struct package *own) {
  m3idx_status st = M3IDX_OK;
  for (int k = 0; k < ranks; k++) {
    struct share s;
    struct package p = {0};
    if (plan_share(h, g->seq_lens, bound, ranks, k, &s) != 0 ||
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


void call_setup_free(struct call_setup *cs) {
  package_free(&cs->own);
  plan_share_free(&cs->mine);
  free(cs->sl);
  free(cs->cu);
  free(cs->cx);
  free(cs->bound);
  cs->sl = cs->cu = cs->cx = cs->bound = NULL;
  MPI_Comm_free(&cs->c);
}

m3idx_status call_setup(MPI_Comm comm, const m3idx_mpi_options *opts, const m3idx_batch *batch,
                        const m3idx_query *query, const m3idx_kcache *kcache,
                        int32_t init_blocks, int32_t local_blocks, int want_scores,
                        int64_t score_stride, int rows_only,
                        m3idx_status (*check)(const void *arg), const void *check_arg,
                        struct call_setup *cs) {
  memset(cs, 0, sizeof *cs);
  m3idx_mpi_options_init(&cs->o);
  if (opts != NULL && opts->size != sizeof cs->o)
    return agree_fail(M3IDX_ERR_OPTIONS, "opts->size is %zu, not sizeof(m3idx_mpi_options) %zu",
                      opts->size, sizeof cs->o);
  if (opts != NULL)
    cs->o = *opts;
  const m3idx_mpi_options *o = &cs->o;
  int ready = 0;
  if (MPI_Initialized(&ready) != MPI_SUCCESS || !ready)
    return agree_fail(M3IDX_ERR_UNSUPPORTED, "MPI is not initialised (MPI_Init first)");
  int e = MPI_Comm_dup(comm, &cs->c);
  if (e != MPI_SUCCESS)
    return agree_mpi_failed("MPI_Comm_dup", e);
  MPI_Comm c = cs->c;
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  MPI_Comm_rank(c, &cs->rank);
  MPI_Comm_size(c, &cs->ranks);
  const int rank = cs->rank, ranks = cs->ranks;
  m3idx_status st = M3IDX_OK;
  if (o->root < 0 || o->root >= ranks)
    st = agree_fail(M3IDX_ERR_INVALID_ARGUMENT, "opts->root is %d, not a rank of the %d",
                    (int)o->root, ranks);
  else if (o->split != M3IDX_MPI_SPLIT_AUTO && o->split != M3IDX_MPI_SPLIT_ROWS &&
           o->split != M3IDX_MPI_SPLIT_BLOCKS)
    st = agree_fail(M3IDX_ERR_INVALID_ARGUMENT, "opts->split is %d, not a m3idx_mpi_split",
                    (int)o->split);
  else if (o->inputs != M3IDX_MPI_INPUTS_ROOT && o->inputs != M3IDX_MPI_INPUTS_EVERY_RANK)
    st = agree_fail(M3IDX_ERR_INVALID_ARGUMENT, "opts->inputs is %d, not a m3idx_mpi_inputs",
                    (int)o->inputs);
  else if (o->inputs == M3IDX_MPI_INPUTS_EVERY_RANK && rank != o->root &&
           (batch == NULL || query == NULL || kcache == NULL))
    st = agree_fail(M3IDX_ERR_NULL_POINTER,
                    "%s is NULL: with M3IDX_MPI_INPUTS_EVERY_RANK every rank passes the inputs",
                    batch == NULL ? "batch" : query == NULL ? "query" : "kcache");
  const int root = cs->root = st == M3IDX_OK ? o->root : 0;
  /* 1. The root checks the call. */
  if (st == M3IDX_OK && rank == root) {
    st = check(check_arg);
    if (st != M3IDX_OK)
      agree_fail(st, "%s", m3idx_last_error(NULL));
  }
  st = agree(c, st);
  if (st != M3IDX_OK) {
    call_setup_free(cs);
    return st;
  }
  /* 2. Sizes and lengths. */
  struct call_head *h = &cs->h;
  if (rank == root)
    head_of(o, batch, query, kcache, init_blocks, local_blocks, want_scores, score_stride,
            rows_only, h);
  e = MPI_Bcast(h, (int)sizeof *h, MPI_BYTE, root, c);
  if (e == MPI_SUCCESS) {
    cs->sl = malloc(4 * (size_t)h->num_reqs + 4);
    cs->cu = malloc(4 * (size_t)h->num_reqs + 8);
    cs->cx = malloc(4 * (size_t)h->num_reqs + 4);
    cs->bound = malloc(4 * (size_t)ranks + 4);
  }
  const int prefill = h->mode == M3IDX_MODE_PREFILL;
  if (e == MPI_SUCCESS && cs->sl && cs->cu && cs->cx) {
    if (rank == root) {
      memcpy(cs->sl, batch->seq_lens, 4 * (size_t)h->num_reqs);
      if (prefill) {
        memcpy(cs->cu, batch->cu_seqlens_q, 4 * (size_t)h->num_reqs + 4);
        memcpy(cs->cx, batch->context_lens, 4 * (size_t)h->num_reqs);
      }
    }
    e = MPI_Bcast(cs->sl, h->num_reqs, MPI_INT32_T, root, c);
    if (e == MPI_SUCCESS && prefill)
      e = MPI_Bcast(cs->cu, h->num_reqs + 1, MPI_INT32_T, root, c);
    if (e == MPI_SUCCESS && prefill)
      e = MPI_Bcast(cs->cx, h->num_reqs, MPI_INT32_T, root, c);
  }
  if (e != MPI_SUCCESS)
    st = agree_mpi_failed("MPI_Bcast (the call's sizes and lengths)", e);
  else if (!cs->sl || !cs->cu || !cs->cx || !cs->bound)
    st = agree_fail(M3IDX_ERR_NO_MEMORY, "no memory for the call's lengths");
  if (st == M3IDX_OK) {
    plan_bounds(h, cs->sl, cs->cu, cs->cx, ranks, cs->bound);
    if (plan_share(h, cs->sl, cs->bound, ranks, rank, &cs->mine) != 0)
      st = agree_fail(M3IDX_ERR_NO_MEMORY, "no memory for its share");
  }
  st = agree(c, st);
  if (st != M3IDX_OK) {
    call_setup_free(cs);
    return st;
  }
  /* 3. The shares. */
  const struct call_inputs_g g = {cs->sl, cs->cu, cs->cx, kcache ? kcache->block_table : NULL,
                                  kcache ? kcache->pages : NULL,
                                  query ? (const uint8_t *)query->data : NULL,
                                  kcache ? kcache->num_pages : 0};
  if (o->inputs == M3IDX_MPI_INPUTS_EVERY_RANK) {
    if (package_build(h, &g, &cs->mine, 1, &cs->own) != 0)
      st = agree_fail(M3IDX_ERR_NO_MEMORY, "no memory for its share");
  } else if (rank == root) {
    st = send_shares(c, root, ranks, h, &g, cs->bound, &cs->own);
  } else {
    e = package_recv(c, root, h, &cs->own);
    if (e != 0)
      st = e < 0 ? agree_fail(M3IDX_ERR_NO_MEMORY, "no memory for its share")
                 : agree_mpi_failed("receiving its share", e);
  }
  /* A rank that could not take its share stops all. */
  st = agree(c, st);
  if (st != M3IDX_OK)
    call_setup_free(cs);
  return st;
}
