/*
 * check-errors.c - every bad input of SPEC section 11, through every entry
 * point it reaches: the documented status, a message naming the argument,
 * and every output buffer (with guard bytes around it) left untouched.
 *
 * SPDX-License-Identifier: MIT
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "suite-main.h"

#define FILL 0x5c

enum entry {
  EP_SCORE = 1 << 0,   /* m3idx_score_decode / m3idx_score_prefill */
  EP_PIN = 1 << 1,
  EP_TOPK = 1 << 2,
  EP_FUSED = 1 << 3,   /* m3idx_index_topk_*, with scores */
  EP_BARE = 1 << 4,    /* m3idx_index_topk_*, scores NULL */
  EP_MAP = 1 << 5,     /* m3idx_work_map_build (decode only) */
  EP_SCORE_MAP = 1 << 6 /* m3idx_score_decode with a work map */
};
#define EP_ALL (EP_SCORE | EP_PIN | EP_TOPK | EP_FUSED | EP_BARE | EP_MAP | EP_SCORE_MAP)
#define EP_KEYS (EP_SCORE | EP_FUSED | EP_BARE | EP_SCORE_MAP)

/* A valid call, and guarded outputs. */
struct fixture {
  struct test_case *tc;
  m3idx_context *ctx;
  m3idx_batch batch;
  m3idx_query query;
  m3idx_kcache kcache;
  int32_t init_blocks, local_blocks;
  int64_t stride;
  int32_t cap;
  struct guarded scores, topk, map;
  int32_t *valid_map;   /* a correct map, when a mutation needs to give one */
  m3idx_context *call_ctx; /* the context the call uses (NULL to test that) */
  int decode;              /* which calls: decode or prefill */
};

static void fixture_init(struct fixture *f, int decode) {
  static const int32_t lens[] = {300, 129, 1000};
  static const int32_t ctx[] = {100, 0, 700};
  static const int32_t q[] = {200, 129, 300};
  memset(f, 0, sizeof *f);
  f->tc = decode ? case_decode(11u, FLAVOR_PLAIN, 2, 2, M3IDX_DTYPE_BF16, 3, lens)
                 : case_prefill(12u, FLAVOR_PLAIN, 2, M3IDX_DTYPE_E4M3, 3, ctx, q);
  m3idx_options o;
  case_options(f->tc, &o);
  ck_assert_int_eq(m3idx_context_create(&o, &f->ctx), M3IDX_OK);
  f->call_ctx = f->ctx;
  f->decode = decode;
  f->batch = f->tc->batch;
  f->query = f->tc->query;
  f->kcache = f->tc->kcache;
  f->init_blocks = 1;
  f->local_blocks = 2;
  f->stride = (f->batch.max_seq_len + 127) / 128;
  size_t n = (size_t)f->batch.num_heads * (size_t)f->batch.num_rows;
  guarded_alloc(&f->scores, n * (size_t)f->stride * sizeof(float), FILL);
  guarded_alloc(&f->topk, n * M3IDX_TOPK * sizeof(int32_t), FILL);
  if (decode) {
    ck_assert_int_eq(m3idx_work_map_capacity(3, (int32_t)f->stride, 2, 2, &f->cap), M3IDX_OK);
    f->cap += 2; /* a larger buffer than needed: unused entries at its end */
  } else {
    f->cap = 4;
  }
  guarded_alloc(&f->map, (size_t)f->cap * 2 * sizeof(int32_t), FILL);
  f->valid_map = malloc((size_t)f->cap * 2 * sizeof(int32_t));
  if (decode)
    ck_assert_int_eq(m3idx_work_map_build(f->ctx, &f->batch, f->valid_map, f->cap), M3IDX_OK);
}

static void fixture_free(struct fixture *f) {
  guarded_free(&f->scores);
  guarded_free(&f->topk);
  guarded_free(&f->map);
  free(f->valid_map);
  m3idx_context_destroy(f->ctx);
  case_free(f->tc);
}

static m3idx_status call(struct fixture *f, enum entry ep) {
  int decode = f->decode;
  switch (ep) {
  case EP_SCORE:
    return decode ? m3idx_score_decode(f->call_ctx, &f->batch, &f->query, &f->kcache, NULL, 0,
                                       f->scores.data, f->stride)
                  : m3idx_score_prefill(f->call_ctx, &f->batch, &f->query, &f->kcache,
                                        f->scores.data, f->stride);
  case EP_SCORE_MAP:
    return m3idx_score_decode(f->call_ctx, &f->batch, &f->query, &f->kcache, f->valid_map,
                              f->cap, f->scores.data, f->stride);
  case EP_PIN:
    return m3idx_pin_forced_blocks(f->call_ctx, &f->batch, f->init_blocks, f->local_blocks,
                                   f->scores.data, f->stride);
  case EP_TOPK:
    return m3idx_topk_from_scores(f->call_ctx, &f->batch, f->scores.data, f->stride,
                                  f->topk.data);
  case EP_FUSED:
  case EP_BARE: {
    float *s = ep == EP_FUSED ? f->scores.data : NULL;
    int64_t st = ep == EP_FUSED ? f->stride : 0;
    return decode ? m3idx_index_topk_decode(f->call_ctx, &f->batch, &f->query, &f->kcache,
                                            f->init_blocks, f->local_blocks, NULL, 0,
                                            f->topk.data, s, st)
                  : m3idx_index_topk_prefill(f->call_ctx, &f->batch, &f->query, &f->kcache,
                                             f->init_blocks, f->local_blocks, f->topk.data,
                                             s, st);
  }
  case EP_MAP:
    return m3idx_work_map_build(f->call_ctx, &f->batch, f->map.data, f->cap);
  }
  return M3IDX_OK;
}

/* One bad input: how to make it, what it must return and say. */
struct bad_input {
  const char *name;
  int decode;            /* 1 decode fixture, 0 prefill, 2 both */
  unsigned entries;      /* where it applies */
  void (*mutate)(struct fixture *f);
  m3idx_status status;
  const char *says;      /* a substring of the message */
};

static void m_ctx_null(struct fixture *f) { f->call_ctx = NULL; }
static void m_mode_bad(struct fixture *f) { f->batch.mode = (m3idx_mode)7; }
static void m_mode_swapped(struct fixture *f) {
  f->batch.mode = f->batch.mode == M3IDX_MODE_DECODE ? M3IDX_MODE_PREFILL : M3IDX_MODE_DECODE;
}
static void m_reqs_zero(struct fixture *f) { f->batch.num_reqs = 0; }
static void m_reqs_negative(struct fixture *f) { f->batch.num_reqs = -3; }
static void m_reqs_limit(struct fixture *f) { f->batch.num_reqs = 4; }
static void m_heads_zero(struct fixture *f) { f->batch.num_heads = 0; }
static void m_heads_limit(struct fixture *f) { f->batch.num_heads = 3; }
static void m_maxlen_zero(struct fixture *f) { f->batch.max_seq_len = 0; }
static void m_maxlen_limit(struct fixture *f) { f->batch.max_seq_len += 1; }
static void m_seq_null(struct fixture *f) { f->batch.seq_lens = NULL; }
static void m_rows_negative(struct fixture *f) { f->batch.num_rows = -1; }
static void m_rows_wrong(struct fixture *f) { f->batch.num_rows -= 1; }
static void m_qlen_zero(struct fixture *f) { f->batch.query_len = 0; f->batch.num_rows = 0; }
static void m_seq_below_qlen(struct fixture *f) { f->tc->seq_lens[1] = 1; }
static void m_seq_negative(struct fixture *f) { f->tc->seq_lens[2] = -5; }
static void m_maxlen_below(struct fixture *f) { f->batch.max_seq_len = 999; }
static void m_cu_null(struct fixture *f) { f->batch.cu_seqlens_q = NULL; }
static void m_ctxlens_null(struct fixture *f) { f->batch.context_lens = NULL; }
static void m_cu_first(struct fixture *f) { f->tc->cu_seqlens_q[0] = 1; }
static void m_cu_monotone(struct fixture *f) {
  int32_t *cu = f->tc->cu_seqlens_q;
  int32_t t = cu[1];
  cu[1] = cu[2];
  cu[2] = t;
}
static void m_cu_last(struct fixture *f) { f->tc->cu_seqlens_q[3] -= 1; }
static void m_ctx_above_seq(struct fixture *f) { f->tc->context_lens[0] = f->tc->seq_lens[0] + 1; }
static void m_ctx_negative(struct fixture *f) { f->tc->context_lens[1] = -1; }
static void m_ctx_plus_q(struct fixture *f) { f->tc->seq_lens[2] -= 1; }
static void m_query_null(struct fixture *f) { f->query.data = NULL; }
static void m_dtype(struct fixture *f) { f->query.dtype = (m3idx_dtype)3; }
static void m_scale_nan(struct fixture *f) { f->query.scale = NAN; }
static void m_scale_inf(struct fixture *f) { f->query.scale = -INFINITY; }
static void m_pages_null(struct fixture *f) { f->kcache.pages = NULL; }
static void m_bt_null(struct fixture *f) { f->kcache.block_table = NULL; }
static void m_num_pages(struct fixture *f) { f->kcache.num_pages = -1; }
static void m_bt_stride(struct fixture *f) { f->kcache.bt_stride = 0; }
static void m_bt_short(struct fixture *f) { f->kcache.bt_stride = 2; }
static void m_page_negative(struct fixture *f) {
  f->tc->block_table[2 * f->kcache.bt_stride + 7] = -1; /* request 2, block 7 */
}
static void m_page_past_end(struct fixture *f) {
  f->tc->block_table[0 * f->kcache.bt_stride + 1] = f->kcache.num_pages;
}
static void m_page_fewer(struct fixture *f) { f->kcache.num_pages = 3; }
static void m_init_negative(struct fixture *f) { f->init_blocks = -1; }
static void m_local_negative(struct fixture *f) { f->local_blocks = -1; }
static void m_forced_sum(struct fixture *f) { f->init_blocks = 9; f->local_blocks = 8; }
static void m_scores_null(struct fixture *f) {
  guarded_free(&f->scores); /* re-made NULL: the call passes NULL */
  f->scores.data = NULL;
  f->scores.raw = NULL;
}
static void m_stride_negative(struct fixture *f) { f->stride = -1; }
static void m_stride_short(struct fixture *f) { f->stride -= 1; }
static void m_stride_huge(struct fixture *f) { f->stride = INT64_MAX / 2; }
static void m_topk_null(struct fixture *f) {
  guarded_free(&f->topk);
  f->topk.data = NULL;
  f->topk.raw = NULL;
}
static void m_map_cap_zero(struct fixture *f) { f->cap = 0; }
static void m_map_cap_small(struct fixture *f) { f->cap = 2; }
static void m_map_stale(struct fixture *f) { f->valid_map[3] ^= 1; }
static void m_map_tail(struct fixture *f) {
  f->valid_map[2 * (f->cap - 1)] = 0;
}

static const struct bad_input bad_inputs[] = {
    {"ctx NULL", 2, EP_ALL, m_ctx_null, M3IDX_ERR_NULL_POINTER, "ctx"},
    {"mode invalid", 2, EP_ALL, m_mode_bad, M3IDX_ERR_INVALID_ARGUMENT, "batch->mode"},
    {"mode of the other call", 2, EP_SCORE | EP_FUSED | EP_BARE, m_mode_swapped,
     M3IDX_ERR_INVALID_ARGUMENT, "batch->mode"},
    {"num_reqs 0", 2, EP_ALL, m_reqs_zero, M3IDX_ERR_INVALID_SIZE, "num_reqs"},
    {"num_reqs negative", 2, EP_ALL, m_reqs_negative, M3IDX_ERR_INVALID_SIZE, "num_reqs"},
    {"num_reqs over max_reqs", 2, EP_ALL, m_reqs_limit, M3IDX_ERR_LIMIT, "max_reqs"},
    {"num_heads 0", 2, EP_ALL, m_heads_zero, M3IDX_ERR_INVALID_SIZE, "num_heads"},
    {"num_heads over max_heads", 2, EP_ALL, m_heads_limit, M3IDX_ERR_LIMIT, "max_heads"},
    {"max_seq_len 0", 2, EP_ALL, m_maxlen_zero, M3IDX_ERR_INVALID_SIZE, "max_seq_len"},
    {"max_seq_len over max_model_len", 2, EP_ALL, m_maxlen_limit, M3IDX_ERR_LIMIT, "max_model_len"},
    {"seq_lens NULL", 2, EP_ALL, m_seq_null, M3IDX_ERR_NULL_POINTER, "seq_lens"},
    {"num_rows negative", 2, EP_ALL, m_rows_negative, M3IDX_ERR_INVALID_SIZE, "num_rows"},
    {"num_rows wrong", 2, EP_ALL, m_rows_wrong, M3IDX_ERR_INCONSISTENT, "num_rows"},
    {"query_len 0", 1, EP_ALL, m_qlen_zero, M3IDX_ERR_INVALID_SIZE, "query_len"},
    {"query_len > seq_len", 1, EP_ALL, m_seq_below_qlen, M3IDX_ERR_INCONSISTENT, "query_len"},
    {"seq_len negative (decode)", 1, EP_ALL, m_seq_negative, M3IDX_ERR_INCONSISTENT, "seq_lens[2]"},
    {"seq_len > max_seq_len", 2, EP_ALL, m_maxlen_below, M3IDX_ERR_INCONSISTENT,
     "seq_lens[2] is 1000, more than batch->max_seq_len 999"},
    {"seq_len negative (prefill)", 0, EP_ALL & ~EP_MAP & ~EP_SCORE_MAP, m_seq_negative,
     M3IDX_ERR_INVALID_SIZE, "seq_lens[2]"},
    {"cu_seqlens_q NULL", 0, EP_ALL & ~EP_MAP & ~EP_SCORE_MAP, m_cu_null, M3IDX_ERR_NULL_POINTER, "cu_seqlens_q"},
    {"context_lens NULL", 0, EP_ALL & ~EP_MAP & ~EP_SCORE_MAP, m_ctxlens_null, M3IDX_ERR_NULL_POINTER, "context_lens"},
    {"cu_seqlens_q[0] != 0", 0, EP_ALL & ~EP_MAP & ~EP_SCORE_MAP, m_cu_first, M3IDX_ERR_INCONSISTENT, "cu_seqlens_q[0]"},
    {"cu_seqlens_q not monotone", 0, EP_ALL & ~EP_MAP & ~EP_SCORE_MAP, m_cu_monotone,
     M3IDX_ERR_INCONSISTENT, "monotone"},
    {"cu_seqlens_q[n] != num_rows", 0, EP_ALL & ~EP_MAP & ~EP_SCORE_MAP, m_cu_last,
     M3IDX_ERR_INCONSISTENT, "cu_seqlens_q[3]"},
    {"context_len > seq_len", 0, EP_ALL & ~EP_MAP & ~EP_SCORE_MAP, m_ctx_above_seq,
     M3IDX_ERR_INCONSISTENT, "context_lens[0]"},
    {"context_len negative", 0, EP_ALL & ~EP_MAP & ~EP_SCORE_MAP, m_ctx_negative,
     M3IDX_ERR_INVALID_SIZE, "context_lens[1]"},
    {"context_len + rows != seq_len", 0, EP_ALL & ~EP_MAP & ~EP_SCORE_MAP, m_ctx_plus_q,
     M3IDX_ERR_INCONSISTENT, "seq_lens"},
    {"query NULL", 2, EP_KEYS, m_query_null, M3IDX_ERR_NULL_POINTER, "query->data"},
    {"query dtype", 2, EP_KEYS, m_dtype, M3IDX_ERR_UNSUPPORTED, "query->dtype"},
    {"scale NaN", 2, EP_KEYS, m_scale_nan, M3IDX_ERR_SCALE, "scale"},
    {"scale -inf", 2, EP_KEYS, m_scale_inf, M3IDX_ERR_SCALE, "scale"},
    {"pages NULL", 2, EP_KEYS, m_pages_null, M3IDX_ERR_NULL_POINTER, "kcache->pages"},
    {"block_table NULL", 2, EP_KEYS, m_bt_null, M3IDX_ERR_NULL_POINTER, "kcache->block_table"},
    {"num_pages negative", 2, EP_KEYS, m_num_pages, M3IDX_ERR_INVALID_SIZE, "num_pages"},
    {"bt_stride 0", 2, EP_KEYS, m_bt_stride, M3IDX_ERR_INVALID_SIZE, "bt_stride"},
    {"bt_stride too short", 2, EP_KEYS, m_bt_short, M3IDX_ERR_INCONSISTENT, "bt_stride"},
    {"page id -1 in a causal block", 2, EP_KEYS, m_page_negative, M3IDX_ERR_PAGE_ID,
     "block_table[2][7]"},
    {"page id num_pages", 2, EP_KEYS, m_page_past_end, M3IDX_ERR_PAGE_ID, "block_table[0][1]"},
    {"num_pages too small", 2, EP_KEYS, m_page_fewer, M3IDX_ERR_PAGE_ID, "num_pages 3"},
    {"init_blocks negative", 2, EP_PIN | EP_FUSED | EP_BARE, m_init_negative,
     M3IDX_ERR_FORCED_BLOCKS, "init_blocks"},
    {"local_blocks negative", 2, EP_PIN | EP_FUSED | EP_BARE, m_local_negative,
     M3IDX_ERR_FORCED_BLOCKS, "local_blocks"},
    {"I + L > 16", 2, EP_PIN | EP_FUSED | EP_BARE, m_forced_sum, M3IDX_ERR_FORCED_BLOCKS, "sum"},
    {"scores NULL", 2, EP_SCORE | EP_PIN | EP_TOPK | EP_SCORE_MAP, m_scores_null,
     M3IDX_ERR_NULL_POINTER, "scores"},
    {"score_stride negative", 2, EP_SCORE | EP_PIN | EP_TOPK | EP_FUSED | EP_SCORE_MAP,
     m_stride_negative, M3IDX_ERR_INVALID_SIZE, "score_stride"},
    {"score_stride < width", 2, EP_SCORE | EP_PIN | EP_TOPK | EP_FUSED | EP_SCORE_MAP,
     m_stride_short, M3IDX_ERR_INCONSISTENT, "score_stride"},
    {"score buffer too large", 2, EP_SCORE | EP_PIN | EP_TOPK | EP_FUSED | EP_SCORE_MAP,
     m_stride_huge, M3IDX_ERR_INVALID_SIZE, "too large"},
    {"topk NULL", 2, EP_TOPK | EP_FUSED | EP_BARE, m_topk_null, M3IDX_ERR_NULL_POINTER, "topk"},
    {"work map capacity 0", 1, EP_MAP | EP_SCORE_MAP, m_map_cap_zero, M3IDX_ERR_INVALID_SIZE,
     "work_map_capacity"},
    {"work map capacity too small", 1, EP_MAP | EP_SCORE_MAP, m_map_cap_small, M3IDX_ERR_WORK_MAP,
     "work_map_capacity"},
    {"work map not built for this batch", 1, EP_SCORE_MAP, m_map_stale, M3IDX_ERR_WORK_MAP,
     "rebuild"},
    {"work map tail not unused", 1, EP_SCORE_MAP, m_map_tail, M3IDX_ERR_WORK_MAP, "unused"},
};
#define NBAD ((int)(sizeof bad_inputs / sizeof bad_inputs[0]))

static void check_untouched(struct fixture *f, const char *name, const char *entry) {
  if (f->scores.raw)
    ck_assert_msg(guarded_intact(&f->scores, FILL, 1), "%s via %s: scores were written", name, entry);
  if (f->topk.raw)
    ck_assert_msg(guarded_intact(&f->topk, FILL, 1), "%s via %s: topk was written", name, entry);
  ck_assert_msg(guarded_intact(&f->map, FILL, 1), "%s via %s: work map was written", name, entry);
}

static const char *entry_name(enum entry ep) {
  switch (ep) {
  case EP_SCORE: return "score";
  case EP_PIN: return "pin";
  case EP_TOPK: return "topk";
  case EP_FUSED: return "fused";
  case EP_BARE: return "fused without scores";
  case EP_MAP: return "work map build";
  case EP_SCORE_MAP: return "score with work map";
  }
  return "?";
}

START_TEST(bad_input_rejected) {
  const struct bad_input *b = &bad_inputs[_i];
  for (int decode = 0; decode <= 1; decode++) {
    if (b->decode != 2 && b->decode != decode)
      continue;
    for (unsigned ep = 1; ep <= EP_SCORE_MAP; ep <<= 1) {
      if (!(b->entries & ep))
        continue;
      if (!decode && (ep == EP_MAP || ep == EP_SCORE_MAP))
        continue;
      struct fixture f;
      fixture_init(&f, decode);
      b->mutate(&f);
      m3idx_status st = call(&f, (enum entry)ep);
      const char *msg = m3idx_last_error(f.call_ctx);
      ck_assert_msg(st == b->status, "%s (%s) via %s: status %d, expected %d (%s)", b->name,
                    decode ? "decode" : "prefill", entry_name((enum entry)ep), (int)st,
                    (int)b->status, msg);
      ck_assert_msg(strstr(msg, b->says) != NULL, "%s via %s: message '%s' does not name '%s'",
                    b->name, entry_name((enum entry)ep), msg, b->says);
      check_untouched(&f, b->name, entry_name((enum entry)ep));
      fixture_free(&f);
    }
  }
}
END_TEST

/* NULL description structs. */
START_TEST(null_structs) {
  for (int decode = 0; decode <= 1; decode++) {
    struct fixture f;
    fixture_init(&f, decode);
    m3idx_status st;
    st = decode ? m3idx_score_decode(f.ctx, NULL, &f.query, &f.kcache, NULL, 0, f.scores.data, 0)
                : m3idx_score_prefill(f.ctx, NULL, &f.query, &f.kcache, f.scores.data, 0);
    ck_assert_int_eq(st, M3IDX_ERR_NULL_POINTER);
    ck_assert_ptr_nonnull(strstr(m3idx_last_error(f.ctx), "batch"));
    st = decode ? m3idx_score_decode(f.ctx, &f.batch, NULL, &f.kcache, NULL, 0, f.scores.data, 0)
                : m3idx_score_prefill(f.ctx, &f.batch, NULL, &f.kcache, f.scores.data, 0);
    ck_assert_int_eq(st, M3IDX_ERR_NULL_POINTER);
    ck_assert_ptr_nonnull(strstr(m3idx_last_error(f.ctx), "query"));
    st = decode ? m3idx_index_topk_decode(f.ctx, &f.batch, &f.query, NULL, 0, 1, NULL, 0,
                                          f.topk.data, NULL, 0)
                : m3idx_index_topk_prefill(f.ctx, &f.batch, &f.query, NULL, 0, 1, f.topk.data,
                                           NULL, 0);
    ck_assert_int_eq(st, M3IDX_ERR_NULL_POINTER);
    ck_assert_ptr_nonnull(strstr(m3idx_last_error(f.ctx), "kcache"));
    ck_assert_int_eq(m3idx_pin_forced_blocks(f.ctx, NULL, 0, 1, f.scores.data, 0),
                     M3IDX_ERR_NULL_POINTER);
    ck_assert_int_eq(m3idx_topk_from_scores(f.ctx, NULL, f.scores.data, 0, f.topk.data),
                     M3IDX_ERR_NULL_POINTER);
    ck_assert_int_eq(m3idx_work_map_build(f.ctx, NULL, f.map.data, f.cap), M3IDX_ERR_NULL_POINTER);
    ck_assert_int_eq(m3idx_work_map_build(f.ctx, &f.batch, NULL, f.cap),
                     decode ? M3IDX_ERR_NULL_POINTER : M3IDX_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(m3idx_synchronize(NULL), M3IDX_ERR_NULL_POINTER);
    check_untouched(&f, "NULL structs", "every entry");
    fixture_free(&f);
  }
}
END_TEST

/* After a failure the context still works, and a success clears the message. */
START_TEST(recovers_after_error) {
  struct fixture f;
  fixture_init(&f, 1);
  f.query.scale = NAN;
  ck_assert_int_eq(call(&f, EP_SCORE), M3IDX_ERR_SCALE);
  ck_assert_str_ne(m3idx_last_error(f.ctx), "");
  f.query.scale = 1.0f;
  ck_assert_int_eq(call(&f, EP_FUSED), M3IDX_OK);
  ck_assert_str_eq(m3idx_last_error(f.ctx), "");
  fixture_free(&f);
}
END_TEST

START_TEST(work_map_capacity_args) {
  int32_t cap = 12345;
  ck_assert_int_eq(m3idx_work_map_capacity(0, 10, 1, 1, &cap), M3IDX_ERR_INVALID_SIZE);
  ck_assert_ptr_nonnull(strstr(m3idx_last_error(NULL), "max_reqs"));
  ck_assert_int_eq(m3idx_work_map_capacity(1, 0, 1, 1, &cap), M3IDX_ERR_INVALID_SIZE);
  ck_assert_int_eq(m3idx_work_map_capacity(1, 1 << 25, 1, 1, &cap), M3IDX_ERR_INVALID_SIZE);
  ck_assert_int_eq(m3idx_work_map_capacity(1, 10, 0, 1, &cap), M3IDX_ERR_INVALID_SIZE);
  ck_assert_int_eq(m3idx_work_map_capacity(1, 10, 1, -1, &cap), M3IDX_ERR_INVALID_SIZE);
  ck_assert_int_eq(m3idx_work_map_capacity(1 << 30, 1 << 24, 64, 1, &cap), M3IDX_ERR_INVALID_SIZE);
  ck_assert_int_eq(m3idx_work_map_capacity(1, 10, 1, 1, NULL), M3IDX_ERR_NULL_POINTER);
  ck_assert_int_eq(cap, 12345);
  /* Hand-computed: 1 row -> 32-block chunks; 3 requests of up to 100 blocks. */
  ck_assert_int_eq(m3idx_work_map_capacity(3, 100, 1, 1, &cap), M3IDX_OK);
  ck_assert_int_eq(cap, 12);
  ck_assert_int_eq(m3idx_work_map_capacity(3, 100, 4, 2, &cap), M3IDX_OK); /* 8 rows: 16 */
  ck_assert_int_eq(cap, 21);
  ck_assert_int_eq(m3idx_work_map_capacity(3, 100, 4, 4, &cap), M3IDX_OK); /* 16 rows: 8 */
  ck_assert_int_eq(cap, 39);
}
END_TEST

/* The map of a known batch, entry by entry. */
START_TEST(work_map_contents) {
  m3idx_options o;
  m3idx_context *ctx;
  m3idx_options_init(&o);
  o.backend = M3IDX_BACKEND_CPU;
  ck_assert_int_eq(m3idx_context_create(&o, &ctx), M3IDX_OK);
  int32_t lens[3] = {1, 4097, 128};
  m3idx_batch b = {.mode = M3IDX_MODE_DECODE, .num_reqs = 3, .num_heads = 1, .num_rows = 3,
                   .max_seq_len = 8192, .seq_lens = lens, .query_len = 1};
  int32_t cap;
  ck_assert_int_eq(m3idx_work_map_capacity(3, 64, 1, 1, &cap), M3IDX_OK);
  ck_assert_int_eq(cap, 6);
  int32_t map[12];
  ck_assert_int_eq(m3idx_work_map_build(ctx, &b, map, cap), M3IDX_OK);
  /* request 0: 1 block; request 1: 33 blocks = 32 + 1; request 2: 1 block */
  int32_t want[12] = {0, 0 | 1 << 24, 1, 0 | 32 << 24, 1, 32 | 1 << 24, 2, 0 | 1 << 24, -1, 0, -1, 0};
  ck_assert_int_eq(memcmp(map, want, sizeof want), 0);
  m3idx_context_destroy(ctx);
}
END_TEST

int main(void) {
  Suite *s = suite_create("errors");
  TCase *t = tcase_create("bad input");
  tcase_set_timeout(t, 300);
  tcase_add_loop_test(t, bad_input_rejected, 0, NBAD);
  tcase_add_test(t, null_structs);
  tcase_add_test(t, recovers_after_error);
  tcase_add_test(t, work_map_capacity_args);
  tcase_add_test(t, work_map_contents);
  suite_add_tcase(s, t);
  return run_suite(s);
}
