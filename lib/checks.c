/*
 * checks.c - argument checks done once, for every backend (SPEC section 11).
 *
 * Every entry point runs these before anything is written.  Scalars are
 * always checked; the contents of the caller's arrays (lengths, page ids,
 * the work map) are checked wherever the library may read them: always on
 * the CPU backend, and on the HIP backend with M3IDX_FLAG_HOST_POINTERS.
 * With device pointers the kernels check them and report at the next
 * synchronising call.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "checks.h"
#include "work-map.h"

#define FAIL(ctx, st, ...) return m3idx__fail((ctx), (st), __VA_ARGS__)

static const char *mode_name(m3idx_mode mode) {
  return mode == M3IDX_MODE_DECODE ? "M3IDX_MODE_DECODE" : "M3IDX_MODE_PREFILL";
}

static m3idx_status check_decode_lengths(m3idx_context *ctx,
                                         const struct m3idx_call *c) {
  for (int32_t r = 0; r < c->num_reqs; r++) {
    int32_t s = c->seq_lens[r];
    if (s < c->query_len)
      FAIL(ctx, M3IDX_ERR_INCONSISTENT,
           "batch->seq_lens[%d] is %d, less than batch->query_len %d",
           (int)r, (int)s, (int)c->query_len);
    if (s > c->max_seq_len)
      FAIL(ctx, M3IDX_ERR_INCONSISTENT,
           "batch->seq_lens[%d] is %d, more than batch->max_seq_len %d",
           (int)r, (int)s, (int)c->max_seq_len);
  }
  return M3IDX_OK;
}

static m3idx_status check_prefill_lengths(m3idx_context *ctx,
                                          const struct m3idx_call *c) {
  const int32_t *cu = c->cu_seqlens_q;
  if (cu[0] != 0)
    FAIL(ctx, M3IDX_ERR_INCONSISTENT,
         "batch->cu_seqlens_q[0] is %d, must be 0", (int)cu[0]);
  for (int32_t r = 0; r < c->num_reqs; r++) {
    if (cu[r + 1] < cu[r])
      FAIL(ctx, M3IDX_ERR_INCONSISTENT,
           "batch->cu_seqlens_q is not monotone: [%d] = %d > [%d] = %d",
           (int)r, (int)cu[r], (int)(r + 1), (int)cu[r + 1]);
  }
  if (cu[c->num_reqs] != c->num_rows)
    FAIL(ctx, M3IDX_ERR_INCONSISTENT,
         "batch->cu_seqlens_q[%d] is %d, but batch->num_rows is %d",
         (int)c->num_reqs, (int)cu[c->num_reqs], (int)c->num_rows);
  for (int32_t r = 0; r < c->num_reqs; r++) {
    int32_t s = c->seq_lens[r], k = c->context_lens[r];
    int64_t q = (int64_t)cu[r + 1] - cu[r];
    if (s < 0)
      FAIL(ctx, M3IDX_ERR_INVALID_SIZE, "batch->seq_lens[%d] is %d, negative",
           (int)r, (int)s);
    if (k < 0)
      FAIL(ctx, M3IDX_ERR_INVALID_SIZE,
           "batch->context_lens[%d] is %d, negative", (int)r, (int)k);
    if (k > s)
      FAIL(ctx, M3IDX_ERR_INCONSISTENT,
           "batch->context_lens[%d] is %d, more than batch->seq_lens[%d] %d",
           (int)r, (int)k, (int)r, (int)s);
    if ((int64_t)k + q != s)
      FAIL(ctx, M3IDX_ERR_INCONSISTENT,
           "request %d: context_lens %d + %lld rows from cu_seqlens_q != seq_lens %d",
           (int)r, (int)k, (long long)q, (int)s);
    if (s > c->max_seq_len)
      FAIL(ctx, M3IDX_ERR_INCONSISTENT,
           "batch->seq_lens[%d] is %d, more than batch->max_seq_len %d",
           (int)r, (int)s, (int)c->max_seq_len);
  }
  return M3IDX_OK;
}

m3idx_status m3idx__check_batch(m3idx_context *ctx, const m3idx_batch *b,
                                int want_mode, struct m3idx_call *c) {
  const struct m3idx_backend_config *lim = &ctx->config;
  if (b == NULL)
    FAIL(ctx, M3IDX_ERR_NULL_POINTER, "batch is NULL");
  if (b->mode != M3IDX_MODE_DECODE && b->mode != M3IDX_MODE_PREFILL)
    FAIL(ctx, M3IDX_ERR_INVALID_ARGUMENT,
         "batch->mode is %d, not M3IDX_MODE_DECODE (1) or M3IDX_MODE_PREFILL (2)",
         (int)b->mode);
  if (want_mode != 0 && (int)b->mode != want_mode)
    FAIL(ctx, M3IDX_ERR_INVALID_ARGUMENT, "batch->mode is %s, this call needs %s",
         mode_name(b->mode), mode_name((m3idx_mode)want_mode));
  if (b->num_reqs < 1)
    FAIL(ctx, M3IDX_ERR_INVALID_SIZE, "batch->num_reqs is %d, must be >= 1",
         (int)b->num_reqs);
  if (b->num_reqs > lim->max_reqs)
    FAIL(ctx, M3IDX_ERR_LIMIT,
         "batch->num_reqs is %d, more than the context's max_reqs %d",
         (int)b->num_reqs, (int)lim->max_reqs);
  if (b->num_heads < 1)
    FAIL(ctx, M3IDX_ERR_INVALID_SIZE, "batch->num_heads is %d, must be >= 1",
         (int)b->num_heads);
  if (b->max_seq_len < 1)
    FAIL(ctx, M3IDX_ERR_INVALID_SIZE, "batch->max_seq_len is %d, must be >= 1",
         (int)b->max_seq_len);
  if (b->seq_lens == NULL)
    FAIL(ctx, M3IDX_ERR_NULL_POINTER, "batch->seq_lens is NULL");
  if (b->num_rows < 0)
    FAIL(ctx, M3IDX_ERR_INVALID_SIZE, "batch->num_rows is %d, negative",
         (int)b->num_rows);
  if (b->mode == M3IDX_MODE_DECODE) {
    if (b->query_len < 1)
      FAIL(ctx, M3IDX_ERR_INVALID_SIZE, "batch->query_len is %d, must be >= 1",
           (int)b->query_len);
    if ((int64_t)b->num_reqs * b->query_len != b->num_rows)
      FAIL(ctx, M3IDX_ERR_INCONSISTENT,
           "batch->num_rows is %d, but a decode batch of %d requests x query_len %d has %lld rows",
           (int)b->num_rows, (int)b->num_reqs, (int)b->query_len,
           (long long)b->num_reqs * b->query_len);
  } else {
    if (b->cu_seqlens_q == NULL)
      FAIL(ctx, M3IDX_ERR_NULL_POINTER, "batch->cu_seqlens_q is NULL");
    if (b->context_lens == NULL)
      FAIL(ctx, M3IDX_ERR_NULL_POINTER, "batch->context_lens is NULL");
  }
  if (b->num_rows > lim->max_rows)
    FAIL(ctx, M3IDX_ERR_LIMIT,
         "batch->num_rows is %d, more than the context's max_rows %d",
         (int)b->num_rows, (int)lim->max_rows);
  /* Heads and the longest sequence size only per-row work: a batch with
     no rows (prefill) needs neither to fit the context. */
  if (b->num_rows > 0 && b->num_heads > lim->max_heads)
    FAIL(ctx, M3IDX_ERR_LIMIT,
         "batch->num_heads is %d, more than the context's max_heads %d",
         (int)b->num_heads, (int)lim->max_heads);
  if (b->num_rows > 0 && b->max_seq_len > lim->max_model_len)
    FAIL(ctx, M3IDX_ERR_LIMIT,
         "batch->max_seq_len is %d, more than the context's max_model_len %d",
         (int)b->max_seq_len, (int)lim->max_model_len);

  c->mode = b->mode;
  c->num_reqs = b->num_reqs;
  c->num_heads = b->num_heads;
  c->num_rows = b->num_rows;
  c->max_seq_len = b->max_seq_len;
  c->width = m3idx__blocks_of(b->max_seq_len);
  c->seq_lens = b->seq_lens;
  c->query_len = b->mode == M3IDX_MODE_DECODE ? b->query_len : 0;
  c->cu_seqlens_q = b->mode == M3IDX_MODE_PREFILL ? b->cu_seqlens_q : NULL;
  c->context_lens = b->mode == M3IDX_MODE_PREFILL ? b->context_lens : NULL;

  if (!ctx->host_visible)
    return M3IDX_OK;
  return b->mode == M3IDX_MODE_DECODE ? check_decode_lengths(ctx, c)
                                      : check_prefill_lengths(ctx, c);
}

m3idx_status m3idx__check_query(m3idx_context *ctx, const m3idx_query *q,
                                struct m3idx_call *c) {
  if (q == NULL)
    FAIL(ctx, M3IDX_ERR_NULL_POINTER, "query is NULL");
  if (q->data == NULL)
    FAIL(ctx, M3IDX_ERR_NULL_POINTER, "query->data is NULL");
  if (q->dtype != M3IDX_DTYPE_BF16 && q->dtype != M3IDX_DTYPE_E4M3)
    FAIL(ctx, M3IDX_ERR_UNSUPPORTED,
         "query->dtype is %d, not M3IDX_DTYPE_BF16 (1) or M3IDX_DTYPE_E4M3 (2)",
         (int)q->dtype);
  if (!isfinite(q->scale))
    FAIL(ctx, M3IDX_ERR_SCALE, "query->scale is %g, must be finite",
         (double)q->scale);
  c->query = q->data;
  c->query_dtype = q->dtype;
  c->scale = q->scale;
  return M3IDX_OK;
}

m3idx_status m3idx__check_kcache(m3idx_context *ctx, const m3idx_kcache *k,
                                 struct m3idx_call *c) {
  if (k == NULL)
    FAIL(ctx, M3IDX_ERR_NULL_POINTER, "kcache is NULL");
  if (k->pages == NULL)
    FAIL(ctx, M3IDX_ERR_NULL_POINTER, "kcache->pages is NULL");
  if (k->block_table == NULL)
    FAIL(ctx, M3IDX_ERR_NULL_POINTER, "kcache->block_table is NULL");
  if (k->num_pages < 0)
    FAIL(ctx, M3IDX_ERR_INVALID_SIZE, "kcache->num_pages is %d, negative",
         (int)k->num_pages);
  if (k->bt_stride < 1)
    FAIL(ctx, M3IDX_ERR_INVALID_SIZE, "kcache->bt_stride is %d, must be >= 1",
         (int)k->bt_stride);
  c->pages = k->pages;
  c->num_pages = k->num_pages;
  c->block_table = k->block_table;
  c->bt_stride = k->bt_stride;
  if (!ctx->host_visible)
    return M3IDX_OK;
  for (int32_t r = 0; r < c->num_reqs; r++) {
    int32_t n = m3idx__request_blocks(c, r);
    if (n > c->bt_stride)
      FAIL(ctx, M3IDX_ERR_INCONSISTENT,
           "request %d needs %d blocks (seq_lens %d), more than kcache->bt_stride %d",
           (int)r, (int)n, (int)c->seq_lens[r], (int)c->bt_stride);
    const int32_t *row = c->block_table + (int64_t)r * c->bt_stride;
    for (int32_t b = 0; b < n; b++)
      if (row[b] < 0 || row[b] >= c->num_pages)
        FAIL(ctx, M3IDX_ERR_PAGE_ID,
             "kcache->block_table[%d][%d] is %d, outside [0, num_pages %d)",
             (int)r, (int)b, (int)row[b], (int)c->num_pages);
  }
  return M3IDX_OK;
}

m3idx_status m3idx__check_forced(m3idx_context *ctx, int32_t init_blocks,
                                 int32_t local_blocks, struct m3idx_call *c) {
  if (init_blocks < 0 || local_blocks < 0 ||
      (int64_t)init_blocks + local_blocks > M3IDX_TOPK)
    FAIL(ctx, M3IDX_ERR_FORCED_BLOCKS,
         "init_blocks %d and local_blocks %d: each must be >= 0 and their sum <= %d",
         (int)init_blocks, (int)local_blocks, M3IDX_TOPK);
  c->init_blocks = init_blocks;
  c->local_blocks = local_blocks;
  return M3IDX_OK;
}

m3idx_status m3idx__check_scores(m3idx_context *ctx, const void *scores,
                                 int64_t score_stride, int optional,
                                 struct m3idx_call *c) {
  if (scores == NULL && !optional)
    FAIL(ctx, M3IDX_ERR_NULL_POINTER, "scores is NULL");
  if (score_stride < 0)
    FAIL(ctx, M3IDX_ERR_INVALID_SIZE, "score_stride is %lld, negative",
         (long long)score_stride);
  if (score_stride == 0 || scores == NULL)
    score_stride = c->width;
  if (score_stride < c->width && c->num_rows > 0) /* no rows: nothing is addressed */
    FAIL(ctx, M3IDX_ERR_INCONSISTENT,
         "score_stride is %lld, less than the width %d = ceil(max_seq_len %d / 128)",
         (long long)score_stride, (int)c->width, (int)c->max_seq_len);
  /* Offsets are int64: the whole buffer must be addressable. */
  int64_t rows = (int64_t)c->num_heads * c->num_rows;
  if (rows > 0 && score_stride > (INT64_MAX / 4) / rows)
    FAIL(ctx, M3IDX_ERR_INVALID_SIZE,
         "score buffer of %lld rows x stride %lld floats is too large to address",
         (long long)rows, (long long)score_stride);
  c->score_stride = score_stride;
  return M3IDX_OK;
}

m3idx_status m3idx__check_topk(m3idx_context *ctx, const int32_t *topk,
                               struct m3idx_call *c) {
  if (topk == NULL)
    FAIL(ctx, M3IDX_ERR_NULL_POINTER, "topk is NULL");
  c->topk = (int32_t *)topk;
  return M3IDX_OK;
}

m3idx_status m3idx__check_work_map(m3idx_context *ctx, const int32_t *map,
                                   int32_t capacity, int building,
                                   struct m3idx_call *c) {
  c->work_map_capacity = 0;
  if (map == NULL) {
    if (building)
      FAIL(ctx, M3IDX_ERR_NULL_POINTER, "work_map is NULL");
    return M3IDX_OK; /* scoring without a map: the backend schedules */
  }
  if (capacity < 1)
    FAIL(ctx, M3IDX_ERR_INVALID_SIZE,
         "work_map_capacity is %d, must be >= 1", (int)capacity);
  c->work_map_capacity = capacity;
  if (!ctx->host_visible)
    return M3IDX_OK;
  int32_t chunk = m3idx__work_chunk_blocks(c->query_len, c->num_heads);
  int64_t need = m3idx__work_map_entries(c->seq_lens, c->num_reqs, chunk);
  if (need > capacity)
    FAIL(ctx, M3IDX_ERR_WORK_MAP,
         "this batch needs %lld work-map entries, more than work_map_capacity %d (size it with m3idx_work_map_capacity)",
         (long long)need, (int)capacity);
  if (building)
    return M3IDX_OK;
  /* A map given to scoring must be the one this batch builds: anything
     else would leave blocks unscored or score them twice. */
  int64_t e = 0;
  for (int32_t r = 0; r < c->num_reqs; r++) {
    int32_t n = m3idx__blocks_of(c->seq_lens[r]);
    for (int32_t b0 = 0; b0 < n; b0 += chunk, e++) {
      int32_t want = m3idx__work_entry(b0, n - b0 < chunk ? n - b0 : chunk);
      if (map[2 * e] != r || map[2 * e + 1] != want)
        FAIL(ctx, M3IDX_ERR_WORK_MAP,
             "work_map entry %lld is {%d, %d}, expected {%d, %d}: rebuild the map with m3idx_work_map_build for these seq_lens, query_len and num_heads",
             (long long)e, (int)map[2 * e], (int)map[2 * e + 1], (int)r, (int)want);
    }
  }
  for (; e < capacity; e++)
    if (map[2 * e] != -1)
      FAIL(ctx, M3IDX_ERR_WORK_MAP,
           "work_map entry %lld is {%d, %d}, expected unused {-1, 0}: rebuild the map with m3idx_work_map_build",
           (long long)e, (int)map[2 * e], (int)map[2 * e + 1]);
  return M3IDX_OK;
}

/* ---- Outputs apart from inputs ------------------------------------------ */

struct span {
  const char *name;
  uintptr_t lo, hi; /* [lo, hi); empty when lo == hi */
};

static struct span span_of(const char *name, const void *p, int64_t bytes) {
  uintptr_t lo = (uintptr_t)p;
  return (struct span){name, lo, p != NULL && bytes > 0 ? lo + (uintptr_t)bytes : lo};
}

static int spans_meet(struct span a, struct span b) {
  return a.lo < a.hi && b.lo < b.hi && a.lo < b.hi && b.lo < a.hi;
}

/* Bytes of the block table the call reads: exact where the lengths can be
 * read, else a lower bound (the first entry of the last request's row). */
static int64_t block_table_bytes(const m3idx_context *ctx, const struct m3idx_call *c) {
  if (!ctx->host_visible)
    return ((int64_t)(c->num_reqs - 1) * c->bt_stride + 1) * 4;
  int64_t end = 0;
  for (int32_t r = 0; r < c->num_reqs; r++) {
    int32_t n = m3idx__request_blocks(c, r);
    if (n > 0 && (int64_t)r * c->bt_stride + n > end)
      end = (int64_t)r * c->bt_stride + n;
  }
  return end * 4;
}

m3idx_status m3idx__check_outputs_apart(m3idx_context *ctx, const struct m3idx_call *c) {
  int64_t rows = (int64_t)c->num_heads * c->num_rows;
  int64_t score_bytes = rows > 0 ? ((rows - 1) * c->score_stride + c->width) * 4 : 0;
  int prefill = c->mode == M3IDX_MODE_PREFILL;
  struct span in[9], out[3];
  int n_in = 0, n_out = 0;
  in[n_in++] = span_of("batch->seq_lens", c->seq_lens, (int64_t)c->num_reqs * 4);
  if (prefill) {
    in[n_in++] = span_of("batch->cu_seqlens_q", c->cu_seqlens_q, ((int64_t)c->num_reqs + 1) * 4);
    in[n_in++] = span_of("batch->context_lens", c->context_lens, (int64_t)c->num_reqs * 4);
  }
  if (c->query != NULL) {
    int64_t elt = c->query_dtype == M3IDX_DTYPE_BF16 ? 2 : 1;
    in[n_in++] = span_of("query->data", c->query, rows * M3IDX_HEAD_DIM * elt);
  }
  if (c->pages != NULL) {
    in[n_in++] = span_of("kcache->pages", c->pages, (int64_t)c->num_pages * M3IDX_PAGE_BYTES);
    in[n_in++] = span_of("kcache->block_table", c->block_table, block_table_bytes(ctx, c));
  }
  if (c->work_map_in != NULL)
    in[n_in++] = span_of("work_map", c->work_map_in, (int64_t)c->work_map_capacity * 8);
  if (c->scores_in != NULL)
    in[n_in++] = span_of("scores", c->scores_in, score_bytes);
  if (c->topk != NULL)
    out[n_out++] = span_of("topk", c->topk, rows * M3IDX_TOPK * 4);
  if (c->scores != NULL)
    out[n_out++] = span_of("scores", c->scores, score_bytes);
  if (c->work_map_out != NULL)
    out[n_out++] = span_of("work_map", c->work_map_out, (int64_t)c->work_map_capacity * 8);
  for (int o = 0; o < n_out; o++) {
    for (int i = 0; i < n_in; i++)
      if (spans_meet(out[o], in[i]))
        FAIL(ctx, M3IDX_ERR_INVALID_ARGUMENT,
             "%s (the output) overlaps %s (an input): outputs must not share memory with inputs",
             out[o].name, in[i].name);
    for (int p = 0; p < o; p++)
      if (spans_meet(out[o], out[p]))
        FAIL(ctx, M3IDX_ERR_INVALID_ARGUMENT, "%s and %s (both outputs) overlap",
             out[p].name, out[o].name);
  }
  return M3IDX_OK;
}
