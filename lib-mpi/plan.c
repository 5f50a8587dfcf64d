/*
 * plan.c - the split of a call's work over the ranks (plan.h).
 *
 * A row's cost is its causal blocks (the pages it reads and scores).
 * Rows (decode: whole requests, whose rows share pages) go to ranks in
 * order, each rank's range ending where the running cost reaches its
 * share of the total.  A block split gives each rank one range of every
 * decode request's blocks; every range but the last ends before the
 * block of the request's first row's position, so that all of its keys
 * are causal for every row of the request.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <stdlib.h>

#include "plan.h"
#include "work-map.h"

int32_t plan_row_blocks(const struct call_head *h, const int32_t *seq_lens, const int32_t *cu,
                        const int32_t *ctx, int32_t i) {
  if (h->mode == M3IDX_MODE_DECODE) {
    const int32_t r = i / h->query_len;
    return (seq_lens[r] - h->query_len + i % h->query_len) / M3IDX_BLOCK_SIZE + 1;
  }
  const int32_t r = m3idx__request_at(cu, h->num_reqs, i);
  return (ctx[r] + (i - cu[r])) / M3IDX_BLOCK_SIZE + 1;
}

/* Cost of item t: a prefill row, or a decode request's rows. */
static int64_t cost_of(const struct call_head *h, const int32_t *seq_lens, const int32_t *cu,
                       const int32_t *ctx, int32_t t) {
  if (h->mode == M3IDX_MODE_DECODE)
    return (int64_t)h->query_len * m3idx__blocks_of(seq_lens[t]);
  return plan_row_blocks(h, seq_lens, cu, ctx, t);
}

void plan_bounds(const struct call_head *h, const int32_t *seq_lens, const int32_t *cu,
                 const int32_t *ctx, int ranks, int32_t *bound) {
  const int32_t items = h->mode == M3IDX_MODE_DECODE ? h->num_reqs : h->num_rows;
  int64_t total = 0, before = 0;
  for (int32_t t = 0; t < items; t++)
    total += cost_of(h, seq_lens, cu, ctx, t);
  /* Rank k starts where the cost before it reaches ceil(total k / P). */
  int32_t t = 0;
  for (int k = 0; k < ranks; k++) {
    const int64_t want = (total * k + ranks - 1) / ranks;
    while (t < items && before < want)
      before += cost_of(h, seq_lens, cu, ctx, t++);
    bound[k] = t;
  }
  bound[ranks] = items;
}

int plan_split(const struct call_head *h, const int32_t *seq_lens, int ranks) {
  if (h->mode != M3IDX_MODE_DECODE || h->split == M3IDX_MPI_SPLIT_ROWS)
    return M3IDX_MPI_SPLIT_ROWS;
  if (h->split == M3IDX_MPI_SPLIT_BLOCKS || h->num_reqs < ranks)
    return M3IDX_MPI_SPLIT_BLOCKS;
  int64_t total = 0, most = 0;
  for (int32_t r = 0; r < h->num_reqs; r++) {
    const int64_t c = m3idx__blocks_of(seq_lens[r]);
    total += c;
    most = c > most ? c : most;
  }
  /* One request heavier than two ranks' shares would hold the others up. */
  return most * ranks > 2 * total ? M3IDX_MPI_SPLIT_BLOCKS : M3IDX_MPI_SPLIT_ROWS;
}

int plan_share(const struct call_head *h, const int32_t *seq_lens, const int32_t *bound,
               int ranks, int k, struct share *s) {
  *s = (struct share){0};
  if (plan_split(h, seq_lens, ranks) == M3IDX_MPI_SPLIT_BLOCKS) {
    s->blocks = 1;
    s->row1 = h->num_rows;
    s->req1 = h->num_reqs;
    s->lo = malloc(sizeof(int32_t) * (size_t)h->num_reqs + 1);
    s->hi = malloc(sizeof(int32_t) * (size_t)h->num_reqs + 1);
    if (s->lo == NULL || s->hi == NULL) {
      plan_share_free(s);
      return -1;
    }
    for (int32_t r = 0; r < h->num_reqs; r++) {
      const int64_t n = m3idx__blocks_of(seq_lens[r]);
      const int64_t last = (seq_lens[r] - h->query_len) / M3IDX_BLOCK_SIZE; /* row 0's block */
      const int64_t a = n * k / ranks, b = n * (k + 1) / ranks;
      s->lo[r] = (int32_t)(a < last ? a : last);
      s->hi[r] = (int32_t)(k + 1 == ranks ? n : b < last ? b : last);
    }
    return 0;
  }
  plan_rows(h, bound, k, &s->row0, &s->row1);
  if (h->mode == M3IDX_MODE_DECODE)
    s->req0 = bound[k], s->req1 = bound[k + 1];
  return 0;
}

void plan_rows(const struct call_head *h, const int32_t *bound, int k, int32_t *row0,
               int32_t *row1) {
  const int32_t per = h->mode == M3IDX_MODE_DECODE ? h->query_len : 1; /* a request's rows */
  *row0 = bound[k] * per;
  *row1 = bound[k + 1] * per;
}

void plan_share_free(struct share *s) {
  free(s->lo);
  free(s->hi);
  s->lo = s->hi = NULL;
}
