/*
 * results.c - run a case through every stage and compare bytes.
 *
 * SPDX-License-Identifier: MIT
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "results.h"

#define FILL 0xa5

static size_t score_count(const struct test_case *tc, int64_t stride) {
  return (size_t)tc->batch.num_heads * (size_t)tc->batch.num_rows * (size_t)stride;
}

static size_t topk_count(const struct test_case *tc) {
  return (size_t)tc->batch.num_heads * (size_t)tc->batch.num_rows * M3IDX_TOPK;
}

static void alloc_results(const struct test_case *tc, struct case_results *r) {
  memset(r, 0, sizeof *r);
  r->stride = oracle_width(&tc->oc) + 3;
  size_t s = score_count(tc, r->stride) + 1, t = topk_count(tc) + 1;
  r->scores = calloc(s, sizeof(float));
  r->scores_mapped = calloc(s, sizeof(float));
  r->pinned = calloc(s, sizeof(float));
  r->fused_scores = calloc(s, sizeof(float));
  r->topk = calloc(t, sizeof(int32_t));
  r->fused_topk = calloc(t, sizeof(int32_t));
  r->fused_topk_bare = calloc(t, sizeof(int32_t));
}

void results_free(struct case_results *r) {
  free(r->scores);
  free(r->scores_mapped);
  free(r->pinned);
  free(r->fused_scores);
  free(r->topk);
  free(r->fused_topk);
  free(r->fused_topk_bare);
  memset(r, 0, sizeof *r);
}

#define STAGE(call, name)                                                   \
  do {                                                                      \
    m3idx_status st_ = (call);                                              \
    if (st_ != M3IDX_OK) {                                                  \
      snprintf(why, n, "seed %llu: %s returned %d (%s)",                    \
               (unsigned long long)tc->seed, name, (int)st_,                \
               m3idx_last_error(ctx));                                      \
      goto fail;                                                            \
    }                                                                       \
  } while (0)

#define GUARDS(g, name)                                                     \
  do {                                                                      \
    if (!guarded_intact(&(g), FILL, 0)) {                                   \
      snprintf(why, n, "seed %llu: %s wrote outside its output buffer",     \
               (unsigned long long)tc->seed, name);                         \
      goto fail;                                                            \
    }                                                                       \
  } while (0)

int results_from_library(m3idx_context *ctx, const struct test_case *tc,
                         struct case_results *out, char *why, size_t n) {
  const m3idx_batch *b = &tc->batch;
  int decode = b->mode == M3IDX_MODE_DECODE;
  alloc_results(tc, out);
  size_t sbytes = score_count(tc, out->stride) * sizeof(float);
  size_t tbytes = topk_count(tc) * sizeof(int32_t);
  struct guarded gs = {0}, gm = {0}, gp = {0}, gt = {0}, gfs = {0}, gft = {0}, gfb = {0};
  int32_t *map = NULL;
  int rc = 1;
  guarded_alloc(&gs, sbytes, FILL);
  guarded_alloc(&gm, sbytes, FILL);
  guarded_alloc(&gp, sbytes, FILL);
  guarded_alloc(&gt, tbytes, FILL);
  guarded_alloc(&gfs, sbytes, FILL);
  guarded_alloc(&gft, tbytes, FILL);
  guarded_alloc(&gfb, tbytes, FILL);

  if (decode) {
    STAGE(m3idx_score_decode(ctx, b, &tc->query, &tc->kcache, NULL, 0, gs.data, out->stride),
          "m3idx_score_decode");
    int32_t cap = 0;
    STAGE(m3idx_work_map_capacity(b->num_reqs, (b->max_seq_len + 127) / 128,
                                  b->query_len, b->num_heads, &cap),
          "m3idx_work_map_capacity");
    map = malloc(sizeof(int32_t) * 2 * (size_t)cap);
    STAGE(m3idx_work_map_build(ctx, b, map, cap), "m3idx_work_map_build");
    STAGE(m3idx_score_decode(ctx, b, &tc->query, &tc->kcache, map, cap, gm.data, out->stride),
          "m3idx_score_decode (work map)");
  } else {
    STAGE(m3idx_score_prefill(ctx, b, &tc->query, &tc->kcache, gs.data, out->stride),
          "m3idx_score_prefill");
    memcpy(gm.data, gs.data, sbytes);
  }
  GUARDS(gs, "scoring");
  GUARDS(gm, "scoring with a work map");
  memcpy(gp.data, gs.data, sbytes);
  STAGE(m3idx_pin_forced_blocks(ctx, b, tc->init_blocks, tc->local_blocks, gp.data, out->stride),
        "m3idx_pin_forced_blocks");
  GUARDS(gp, "m3idx_pin_forced_blocks");
  STAGE(m3idx_topk_from_scores(ctx, b, gp.data, out->stride, gt.data),
        "m3idx_topk_from_scores");
  GUARDS(gt, "m3idx_topk_from_scores");
  if (decode) {
    STAGE(m3idx_index_topk_decode(ctx, b, &tc->query, &tc->kcache, tc->init_blocks,
                                  tc->local_blocks, NULL, 0, gft.data, gfs.data, out->stride),
          "m3idx_index_topk_decode");
    STAGE(m3idx_index_topk_decode(ctx, b, &tc->query, &tc->kcache, tc->init_blocks,
                                  tc->local_blocks, NULL, 0, gfb.data, NULL, 0),
          "m3idx_index_topk_decode (no scores)");
  } else {
    STAGE(m3idx_index_topk_prefill(ctx, b, &tc->query, &tc->kcache, tc->init_blocks,
                                   tc->local_blocks, gft.data, gfs.data, out->stride),
          "m3idx_index_topk_prefill");
    STAGE(m3idx_index_topk_prefill(ctx, b, &tc->query, &tc->kcache, tc->init_blocks,
                                   tc->local_blocks, gfb.data, NULL, 0),
          "m3idx_index_topk_prefill (no scores)");
  }
  STAGE(m3idx_synchronize(ctx), "m3idx_synchronize");
  GUARDS(gfs, "the fused call's scores");
  GUARDS(gft, "the fused call's top-k");
  GUARDS(gfb, "the fused call's top-k (no scores)");
  memcpy(out->scores, gs.data, sbytes);
  memcpy(out->scores_mapped, gm.data, sbytes);
  memcpy(out->pinned, gp.data, sbytes);
  memcpy(out->topk, gt.data, tbytes);
  memcpy(out->fused_scores, gfs.data, sbytes);
  memcpy(out->fused_topk, gft.data, tbytes);
  memcpy(out->fused_topk_bare, gfb.data, tbytes);
  rc = 0;
fail:
  free(map);
  guarded_free(&gs);
  guarded_free(&gm);
  guarded_free(&gp);
  guarded_free(&gt);
  guarded_free(&gfs);
  guarded_free(&gft);
  guarded_free(&gfb);
  return rc;
}

void results_from_oracle(const struct test_case *tc, struct case_results *out) {
  alloc_results(tc, out);
  size_t sbytes = score_count(tc, out->stride) * sizeof(float);
  oracle_scores(&tc->oc, out->scores, out->stride);
  memcpy(out->scores_mapped, out->scores, sbytes);
  memcpy(out->pinned, out->scores, sbytes);
  oracle_pin(&tc->oc, out->pinned, out->stride);
  oracle_topk(&tc->oc, out->pinned, out->stride, out->topk);
  memcpy(out->fused_scores, out->pinned, sbytes);
  memcpy(out->fused_topk, out->topk, topk_count(tc) * sizeof(int32_t));
  memcpy(out->fused_topk_bare, out->topk, topk_count(tc) * sizeof(int32_t));
}

static int compare_scores(const struct test_case *tc, const float *a,
                          const float *b, int64_t stride, const char *what,
                          char *why, size_t n) {
  for (int h = 0; h < tc->batch.num_heads; h++)
    for (int row = 0; row < tc->batch.num_rows; row++) {
      int64_t off = ((int64_t)h * tc->batch.num_rows + row) * stride;
      int nb = oracle_row_blocks(&tc->oc, row);
      if (memcmp(a + off, b + off, sizeof(float) * (size_t)nb) != 0) {
        int blk = 0;
        while (memcmp(a + off + blk, b + off + blk, sizeof(float)) == 0)
          blk++;
        uint32_t ua, ub;
        memcpy(&ua, a + off + blk, 4);
        memcpy(&ub, b + off + blk, 4);
        snprintf(why, n,
                 "seed %llu: %s differ at head %d row %d block %d: 0x%08x (%g) vs 0x%08x (%g)",
                 (unsigned long long)tc->seed, what, h, row, blk, ua,
                 (double)a[off + blk], ub, (double)b[off + blk]);
        return 1;
      }
    }
  return 0;
}

static int compare_topk(const struct test_case *tc, const int32_t *a,
                        const int32_t *b, const char *what, char *why,
                        size_t n) {
  size_t count = topk_count(tc);
  if (memcmp(a, b, count * sizeof(int32_t)) == 0)
    return 0;
  size_t i = 0;
  while (a[i] == b[i])
    i++;
  snprintf(why, n, "seed %llu: %s differ at head %d row %d slot %d: %d vs %d",
           (unsigned long long)tc->seed, what,
           (int)(i / M3IDX_TOPK / (size_t)tc->batch.num_rows),
           (int)(i / M3IDX_TOPK % (size_t)tc->batch.num_rows),
           (int)(i % M3IDX_TOPK), a[i], b[i]);
  return 1;
}

int results_compare(const struct test_case *tc, const struct case_results *a,
                    const struct case_results *b, char *why, size_t n) {
  return compare_scores(tc, a->scores, b->scores, a->stride, "scores", why, n) ||
         compare_scores(tc, a->scores_mapped, b->scores_mapped, a->stride,
                        "scores (work map)", why, n) ||
         compare_scores(tc, a->pinned, b->pinned, a->stride, "pinned scores", why, n) ||
         compare_topk(tc, a->topk, b->topk, "top-k", why, n) ||
         compare_scores(tc, a->fused_scores, b->fused_scores, a->stride,
                        "fused scores", why, n) ||
         compare_topk(tc, a->fused_topk, b->fused_topk, "fused top-k", why, n) ||
         compare_topk(tc, a->fused_topk_bare, b->fused_topk_bare,
                      "fused top-k (no scores)", why, n);
}
