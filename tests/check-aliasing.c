/*
 * check-aliasing.c - an output that shares memory with an input (or with
 * the other output) is refused with M3IDX_ERR_INVALID_ARGUMENT naming
 * both, and nothing is written: every call, every pair, by one byte of
 * overlap at either end.  Outputs right next to inputs are fine.
 *
 * SPDX-License-Identifier: MIT
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "suite-main.h"

/* One arena holds every buffer of a prefill or decode call, so that an
 * output can be placed over any input. */
enum { REQS = 2, HEADS = 2, ROWS = 4, PAGES = 3, WIDTH = 3, CAP = 8 };
struct arena {
  unsigned char *base, *copy;
  size_t bytes;
};
static struct arena A;
static m3idx_context *ctx;

/* Offsets of the inputs in the arena, GAP bytes apart (more than any
 * output), so that an output can overlap one input alone. */
enum { GAP = 1024,
       OFF_PAGES = GAP,
       OFF_QUERY = OFF_PAGES + PAGES * M3IDX_PAGE_BYTES + GAP,
       OFF_BT = OFF_QUERY + ROWS * HEADS * M3IDX_HEAD_DIM * 2 + GAP,
       OFF_SEQ = OFF_BT + REQS * 3 * 4 + GAP,
       OFF_CU = OFF_SEQ + REQS * 4 + GAP,
       OFF_CTX = OFF_CU + (REQS + 1) * 4 + GAP,
       OFF_MAP = OFF_CTX + REQS * 4 + GAP,
       OFF_SCORES_IN = OFF_MAP + CAP * 8 + GAP,
       OFF_FREE = OFF_SCORES_IN + HEADS * ROWS * WIDTH * 4 + GAP,
       ARENA = (OFF_FREE + 65536 + 63) / 64 * 64 }; /* aligned_alloc wants a multiple of 64 */

static void setup(void) {
  A.bytes = ARENA;
  A.base = aligned_alloc(64, A.bytes);
  A.copy = malloc(A.bytes);
  for (size_t i = 0; i < A.bytes; i++)
    A.base[i] = (unsigned char)(i * 131u + 7u);
  for (int p = 0; p < PAGES; p++) /* sane scales: no NaN pages */
    memset(A.base + OFF_PAGES + p * M3IDX_PAGE_BYTES + M3IDX_PAGE_DATA_BYTES, 127, 512);
  memset(A.base + OFF_QUERY, 0, ROWS * HEADS * M3IDX_HEAD_DIM * 2);
  int32_t bt[REQS * 3] = {0, 1, 2, 2, 1, 0}, seq[REQS] = {300, 129}, cu[REQS + 1] = {0, 2, 4},
          cl[REQS] = {298, 127};
  memcpy(A.base + OFF_BT, bt, sizeof bt);
  memcpy(A.base + OFF_SEQ, seq, sizeof seq);
  memcpy(A.base + OFF_CU, cu, sizeof cu);
  memcpy(A.base + OFF_CTX, cl, sizeof cl);
  memset(A.base + OFF_SCORES_IN, 0, HEADS * ROWS * WIDTH * 4);
  m3idx_options o;
  m3idx_options_init(&o);
  o.backend = suite_wants_hip() ? M3IDX_BACKEND_HIP : M3IDX_BACKEND_CPU;
  o.flags = M3IDX_FLAG_HOST_POINTERS;
  o.max_reqs = REQS;
  o.max_model_len = 384;
  o.max_rows = ROWS;
  o.max_heads = HEADS;
  ck_assert_int_eq(m3idx_context_create(&o, &ctx), M3IDX_OK);
  /* A decode work map, built into its place. */
  m3idx_batch b = {.mode = M3IDX_MODE_DECODE, .num_reqs = REQS, .num_heads = HEADS,
                   .num_rows = ROWS, .max_seq_len = 300,
                   .seq_lens = (int32_t *)(A.base + OFF_SEQ), .query_len = 2};
  ck_assert_int_eq(m3idx_work_map_build(ctx, &b, (int32_t *)(A.base + OFF_MAP), CAP), M3IDX_OK);
  memcpy(A.copy, A.base, A.bytes);
}

static void teardown(void) {
  m3idx_context_destroy(ctx);
  free(A.base);
  free(A.copy);
}

static m3idx_batch batch(int decode) {
  m3idx_batch b = {.mode = decode ? M3IDX_MODE_DECODE : M3IDX_MODE_PREFILL,
                   .num_reqs = REQS, .num_heads = HEADS, .num_rows = ROWS,
                   .max_seq_len = 300, .seq_lens = (int32_t *)(A.base + OFF_SEQ)};
  if (decode)
    b.query_len = 2;
  else {
    b.cu_seqlens_q = (int32_t *)(A.base + OFF_CU);
    b.context_lens = (int32_t *)(A.base + OFF_CTX);
  }
  return b;
}

/* The calls; topk and scores are where the test puts them. */
enum call { SCORE_DECODE, SCORE_PREFILL, PIN, TOPK, FUSED_DECODE, FUSED_PREFILL, MAP, CALLS };
static const char *call_names[] = {"score_decode", "score_prefill", "pin_forced_blocks",
                                   "topk_from_scores", "index_topk_decode",
                                   "index_topk_prefill", "work_map_build"};

static m3idx_status call(enum call k, void *topk, void *scores) {
  int decode = k == SCORE_DECODE || k == FUSED_DECODE || k == MAP || k == PIN || k == TOPK;
  m3idx_batch b = batch(decode);
  m3idx_query q = {A.base + OFF_QUERY, M3IDX_DTYPE_BF16, 0.5f};
  m3idx_kcache kc = {A.base + OFF_PAGES, PAGES, (int32_t *)(A.base + OFF_BT), 3};
  const int32_t *map = (int32_t *)(A.base + OFF_MAP);
  switch (k) {
  case SCORE_DECODE: return m3idx_score_decode(ctx, &b, &q, &kc, map, CAP, scores, 0);
  case SCORE_PREFILL: return m3idx_score_prefill(ctx, &b, &q, &kc, scores, 0);
  case PIN: return m3idx_pin_forced_blocks(ctx, &b, 1, 1, scores, 0);
  case TOPK: return m3idx_topk_from_scores(ctx, &b, (float *)(A.base + OFF_SCORES_IN), 0, topk);
  case FUSED_DECODE:
    return m3idx_index_topk_decode(ctx, &b, &q, &kc, 1, 1, map, CAP, topk, scores, 0);
  case FUSED_PREFILL: return m3idx_index_topk_prefill(ctx, &b, &q, &kc, 1, 1, topk, scores, 0);
  case MAP: return m3idx_work_map_build(ctx, &b, topk, CAP);
  default: return M3IDX_OK;
  }
}

struct input {
  const char *name;
  size_t off, bytes;
  unsigned calls; /* which calls read it */
};
#define ALL_KEYS ((1u << SCORE_DECODE) | (1u << SCORE_PREFILL) | (1u << FUSED_DECODE) | \
                  (1u << FUSED_PREFILL))
#define PREFILL_ONLY ((1u << SCORE_PREFILL) | (1u << FUSED_PREFILL))
static const struct input inputs[] = {
    {"kcache->pages", OFF_PAGES, PAGES * M3IDX_PAGE_BYTES, ALL_KEYS},
    {"query->data", OFF_QUERY, ROWS * HEADS * M3IDX_HEAD_DIM * 2, ALL_KEYS},
    /* The last request (129 tokens) reads 2 of its 3 columns. */
    {"kcache->block_table", OFF_BT, (REQS * 3 - 1) * 4, ALL_KEYS},
    {"batch->seq_lens", OFF_SEQ, REQS * 4, ~0u},
    {"batch->cu_seqlens_q", OFF_CU, (REQS + 1) * 4, PREFILL_ONLY},
    {"batch->context_lens", OFF_CTX, REQS * 4, PREFILL_ONLY},
    {"work_map", OFF_MAP, CAP * 8, (1u << SCORE_DECODE) | (1u << FUSED_DECODE)},
    {"scores", OFF_SCORES_IN, HEADS * ROWS * WIDTH * 4, 1u << TOPK},
};

/* The output each call writes, and its size. */
static size_t out_bytes(enum call k, int scores) {
  if (scores)
    return HEADS * ROWS * WIDTH * 4;
  return k == MAP ? CAP * 8 : HEADS * ROWS * M3IDX_TOPK * 4;
}
static int writes_topk(enum call k) {
  return k == TOPK || k == FUSED_DECODE || k == FUSED_PREFILL || k == MAP;
}
static int writes_scores(enum call k) { return k != TOPK && k != MAP; }

START_TEST(output_over_input) {
  enum call k = (enum call)_i;
  unsigned char *free_space = A.base + OFF_FREE;
  for (int which = 0; which < 2; which++) { /* 0: topk (or the map), 1: scores */
    if (which == 0 ? !writes_topk(k) : !writes_scores(k))
      continue;
    size_t ob = out_bytes(k, which);
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
      if (!(inputs[i].calls & (1u << k)))
        continue;
      /* One byte of overlap at the input's end, then at its start. */
      size_t at[2] = {inputs[i].off + inputs[i].bytes - 4, inputs[i].off - ob + 4};
      for (int e = 0; e < 2; e++) {
        void *o = A.base + at[e];
        void *topk = which == 0 ? o : free_space;
        void *scores = which == 1 ? o : free_space + 4096;
        m3idx_status st = call(k, topk, scores);
        ck_assert_msg(st == M3IDX_ERR_INVALID_ARGUMENT, "%s: %s over %s: status %d",
                      call_names[k], which ? "scores" : "topk", inputs[i].name, (int)st);
        const char *msg = m3idx_last_error(ctx);
        ck_assert_msg(strstr(msg, inputs[i].name) && strstr(msg, "overlaps"),
                      "%s: message '%s'", call_names[k], msg);
        ck_assert_msg(memcmp(A.base, A.copy, A.bytes) == 0, "%s: memory written",
                      call_names[k]);
      }
    }
  }
  /* Both outputs over each other (fused calls). */
  if (writes_topk(k) && writes_scores(k)) {
    ck_assert_int_eq(call(k, free_space, free_space + 64), M3IDX_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(m3idx_last_error(ctx), "both outputs"), "%s", m3idx_last_error(ctx));
    ck_assert(memcmp(A.base, A.copy, A.bytes) == 0);
  }
  /* Outputs that only touch an input's end run. */
  void *topk = free_space, *scores = free_space + 8192;
  if (k == TOPK)
    topk = A.base + OFF_SCORES_IN + HEADS * ROWS * WIDTH * 4;
  ck_assert_msg(call(k, topk, scores) == M3IDX_OK, "%s: %s", call_names[k],
                m3idx_last_error(ctx));
}
END_TEST

int main(void) {
  Suite *s = suite_create("aliasing");
  TCase *tc = tcase_create("aliasing");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_loop_test(tc, output_over_input, 0, CALLS);
  suite_add_tcase(s, tc);
  return run_suite(s);
}
