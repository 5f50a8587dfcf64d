/*
 * compute-share.c - a rank's share computed with the ordinary library, in
 * a context of its own sized for the share (host memory; on the HIP
 * backend, staged to the rank's GPU).
 *
 * Rows: the fused call itself; its rows keep their positions, so their
 * pins, ids and scores are the single call's.  Blocks: the share's raw
 * block scores (m3idx_score_decode), then each block pinned by SPEC's rule
 * for its row in the whole request (lib/spec-rules.h), and each row's
 * top-16 among the share's blocks by SPEC section 7's key, for the
 * root's merge (m3idx_merge_topk).
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "compute-share.h"
#include "spec-rules.h"
#include "work-map.h"

void share_result_free(struct share_result *r) {
  free(r->topk);
  free(r->ids);
  free(r->scores);
  free(r->vals);
  *r = (struct share_result){0};
}

/* Keep the 16 largest keys (and their values) in keys/vals, descending:
 * *n of them so far. */
static void keep(uint64_t *keys, float *vals, int *n, uint64_t key, float val) {
  if (*n == M3IDX_TOPK && key <= keys[M3IDX_TOPK - 1])
    return;
  int at = *n < M3IDX_TOPK ? (*n)++ : M3IDX_TOPK - 1;
  for (; at > 0 && keys[at - 1] < key; at--) {
    keys[at] = keys[at - 1];
    vals[at] = vals[at - 1];
  }
  keys[at] = key;
  vals[at] = val;
}

/* Blocks: pin the share's scores and take each row's top-16 of them. */
static void select_blocks(const struct call_head *h, const struct share *s,
                          const struct package *p, const int32_t *seq_lens,
                          struct share_result *out) {
  const int32_t q = h->query_len;
  for (int32_t i = 0; i < p->num_reqs; i++) {
    const int32_t r = p->req_of[i];
    for (int32_t j = 0; j < q; j++) {
      const int32_t row = r * q + j, sub = i * q + j;
      const int32_t n = (seq_lens[r] - q + j) / M3IDX_BLOCK_SIZE + 1;
      const int32_t end = s->hi[r] < n ? s->hi[r] : n;
      for (int32_t hd = 0; hd < h->num_heads; hd++) {
        float *sc = out->scores + ((int64_t)hd * p->num_rows + sub) * out->width;
        uint64_t keys[M3IDX_TOPK];
        float vals[M3IDX_TOPK];
        int count = 0;
        for (int32_t b = s->lo[r]; b < end; b++) {
          const float v = m3idx__pinned(sc[b - s->lo[r]], b, n, h->init_blocks, h->local_blocks);
          sc[b - s->lo[r]] = v;
          keep(keys, vals, &count, m3idx__rank_key(v, b), v);
        }
        const int64_t at = ((int64_t)hd * h->num_rows + row) * M3IDX_TOPK;
        for (int k = 0; k < count; k++) {
          out->ids[at + k] = m3idx__rank_key_id(keys[k]);
          out->vals[at + k] = vals[k];
        }
      }
    }
  }
}

m3idx_status share_context(const struct call_head *h, const m3idx_options *context,
                           const struct package *p, m3idx_context **ctx, m3idx_batch *b,
                           m3idx_query *q, m3idx_kcache *kc) {
  m3idx_options o = *context;
  o.max_reqs = p->num_reqs;
  o.max_model_len = p->max_seq_len;
  o.max_rows = p->num_rows;
  o.max_heads = h->num_heads;
  o.flags |= M3IDX_FLAG_HOST_POINTERS;
  const m3idx_status st = m3idx_context_create(&o, ctx);
  if (st != M3IDX_OK)
    return agree_fail(st, "its context: %s", m3idx_last_error(NULL));
  *b = (m3idx_batch){(m3idx_mode)h->mode, p->num_reqs, h->num_heads, p->num_rows,
                     p->max_seq_len, p->seq_lens, h->query_len, p->cu, p->ctx};
  *q = (m3idx_query){p->query, (m3idx_dtype)h->dtype, h->scale};
  *kc = (m3idx_kcache){p->pages, p->num_pages, p->bt, p->bt_stride};
  return M3IDX_OK;
}

m3idx_status compute_share(const struct call_head *h, const m3idx_options *context,
                           const struct share *s, const struct package *p,
                           const int32_t *seq_lens, struct share_result *out) {
  *out = (struct share_result){0};
  out->rows = p->num_rows;
  out->width = p->num_reqs > 0 ? (int32_t)m3idx__blocks_of(p->max_seq_len) : 0;
  const size_t pairs = (size_t)h->num_heads * (size_t)p->num_rows;
  const size_t lists = (size_t)h->num_heads * (size_t)h->num_rows * M3IDX_TOPK;
  if (s->blocks) {
    out->ids = malloc(sizeof(int32_t) * lists + 1);
    out->vals = malloc(sizeof(float) * lists + 1);
    out->scores = malloc(sizeof(float) * pairs * (size_t)out->width + 1);
    if (out->ids == NULL || out->vals == NULL || out->scores == NULL)
      goto no_memory;
    for (size_t i = 0; i < lists; i++)
      out->ids[i] = -1, out->vals[i] = -INFINITY;
  } else {
    out->topk = malloc(sizeof(int32_t) * pairs * M3IDX_TOPK + 1);
    out->scores = h->want_scores ? malloc(sizeof(float) * pairs * (size_t)out->width + 1) : NULL;
    if (out->topk == NULL || (h->want_scores && out->scores == NULL))
      goto no_memory;
  }
  if (p->num_reqs == 0)
    return M3IDX_OK;

  m3idx_context *ctx = NULL;
  m3idx_batch b;
  m3idx_query qu;
  m3idx_kcache kc;
  m3idx_status st = share_context(h, context, p, &ctx, &b, &qu, &kc);
  if (st != M3IDX_OK)
    return st;
  if (s->blocks)
    st = m3idx_score_decode(ctx, &b, &qu, &kc, NULL, 0, out->scores, out->width);
  else if (h->mode == M3IDX_MODE_DECODE)
    st = m3idx_index_topk_decode(ctx, &b, &qu, &kc, h->init_blocks, h->local_blocks, NULL, 0,
                                 out->topk, out->scores, out->scores ? out->width : 0);
  else
    st = m3idx_index_topk_prefill(ctx, &b, &qu, &kc, h->init_blocks, h->local_blocks, out->topk,
                                  out->scores, out->scores ? out->width : 0);
  if (st == M3IDX_OK)
    st = m3idx_synchronize(ctx);
  if (st != M3IDX_OK)
    st = agree_fail(st, "its share: %s", m3idx_last_error(ctx));
  m3idx_context_destroy(ctx);
  if (st == M3IDX_OK && s->blocks)
    select_blocks(h, s, p, seq_lens, out);
  return st;
no_memory:
  share_result_free(out);
  return agree_fail(M3IDX_ERR_NO_MEMORY, "no memory for its share's results");
}
