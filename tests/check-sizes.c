/*
 * check-sizes.c - every public function that takes a count or size, with
 * the largest and the most negative values of its type (and INT64_MAX where
 * it is 64-bit): refused with M3IDX_ERR_INVALID_SIZE (or the documented
 * status), a message naming the argument, and outputs untouched.  Each
 * count is refused before any arithmetic on it can overflow.
 *
 * SPDX-License-Identifier: MIT
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "suite-main.h"

#define FILL 0xa5

/* A two-request decode batch and a prefill batch over three pages, in a
 * context with small limits, and guarded outputs. */
static m3idx_context *ctx;
static uint8_t pages[3 * M3IDX_PAGE_BYTES];
static uint16_t query[4 * 2 * M3IDX_HEAD_DIM];
static int32_t seq_lens[2] = {300, 129}, block_table[2 * 3] = {0, 1, 2, 2, 1, 0};
static int32_t cu[3] = {0, 2, 4}, context_lens[2] = {298, 127};
static struct guarded out;

static void setup(void) {
  m3idx_options o;
  m3idx_options_init(&o);
  o.backend = suite_wants_hip() ? M3IDX_BACKEND_HIP : M3IDX_BACKEND_CPU;
  o.flags = M3IDX_FLAG_HOST_POINTERS;
  o.max_reqs = 4;
  o.max_model_len = 1024;
  o.max_rows = 8;
  o.max_heads = 2;
  ck_assert_int_eq(m3idx_context_create(&o, &ctx), M3IDX_OK);
  memset(pages, 0x11, sizeof pages);
  guarded_alloc(&out, 1 << 16, FILL);
}

static void teardown(void) {
  m3idx_context_destroy(ctx);
  guarded_free(&out);
}

static m3idx_batch decode_batch(void) {
  return (m3idx_batch){.mode = M3IDX_MODE_DECODE, .num_reqs = 2, .num_heads = 2,
                       .num_rows = 4, .max_seq_len = 300, .seq_lens = seq_lens,
                       .query_len = 2};
}

static m3idx_batch prefill_batch(void) {
  return (m3idx_batch){.mode = M3IDX_MODE_PREFILL, .num_reqs = 2, .num_heads = 2,
                       .num_rows = 4, .max_seq_len = 300, .seq_lens = seq_lens,
                       .cu_seqlens_q = cu, .context_lens = context_lens};
}

static const m3idx_query q = {query, M3IDX_DTYPE_BF16, 0.125f};
static m3idx_kcache kcache(void) { return (m3idx_kcache){pages, 3, block_table, 3}; }

/* The call was refused with one of the statuses, the message names the
 * argument, and the output (with its guards) holds the fill. */
static void refused(m3idx_status st, m3idx_status want, m3idx_status also,
                    const m3idx_context *c, const char *name) {
  ck_assert_msg(st == want || st == also, "%s: status %d, want %d", name, (int)st, (int)want);
  const char *msg = m3idx_last_error(c);
  ck_assert_msg(strstr(msg, name) != NULL, "message '%s' does not name %s", msg, name);
  ck_assert_msg(guarded_intact(&out, FILL, 1), "%s: output written", name);
}

START_TEST(encode_keys_counts) {
  float keys[2 * M3IDX_HEAD_DIM] = {1.0f};
  uint8_t *p = out.data;
  /* The case: num_tokens + 127 overflowed, num_pages < 0 was read. */
  refused(m3idx_encode_keys_f32(keys, INT64_MAX, p, -((int64_t)1 << 56)), M3IDX_ERR_INVALID_SIZE,
          M3IDX_ERR_INVALID_SIZE, NULL, "num_pages");
  refused(m3idx_encode_keys_f32(keys, INT64_MAX, p, (int64_t)1 << 56), M3IDX_ERR_INVALID_SIZE,
          M3IDX_ERR_INVALID_SIZE, NULL, "num_tokens");
  refused(m3idx_encode_keys_f32(keys, INT64_MAX, p, INT64_MAX), M3IDX_ERR_INVALID_SIZE,
          M3IDX_ERR_INVALID_SIZE, NULL, "num_tokens");
  refused(m3idx_encode_keys_f32(keys, 1, p, INT64_MAX), M3IDX_ERR_INVALID_SIZE,
          M3IDX_ERR_INVALID_SIZE, NULL, "num_pages");
  refused(m3idx_encode_keys_f32(keys, INT64_MIN, p, 1), M3IDX_ERR_INVALID_SIZE,
          M3IDX_ERR_INVALID_SIZE, NULL, "num_tokens");
  refused(m3idx_encode_keys_f32(keys, 0, p, INT64_MIN), M3IDX_ERR_INVALID_SIZE,
          M3IDX_ERR_INVALID_SIZE, NULL, "num_pages");
  refused(m3idx_encode_keys_f32(keys, 2, p, -1), M3IDX_ERR_INVALID_SIZE, M3IDX_ERR_INVALID_SIZE,
          NULL, "num_pages");
  /* (2^63 - 1) / 128 rounded up is 2^56: a count that matches but cannot be addressed. */
  refused(m3idx_encode_keys_f32(keys, INT64_MAX - 127, p, (int64_t)1 << 56),
          M3IDX_ERR_INVALID_SIZE, M3IDX_ERR_INVALID_SIZE, NULL, "num_tokens");
}
END_TEST

START_TEST(page_slot) {
  float key[M3IDX_HEAD_DIM] = {0};
  uint16_t kb[M3IDX_HEAD_DIM] = {0};
  static const int32_t bad[] = {INT32_MAX, INT32_MIN, -1, M3IDX_BLOCK_SIZE};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    refused(m3idx_page_encode_f32(out.data, bad[i], key), M3IDX_ERR_INVALID_SIZE,
            M3IDX_ERR_INVALID_SIZE, NULL, "slot");
    refused(m3idx_page_encode_bf16(out.data, bad[i], kb), M3IDX_ERR_INVALID_SIZE,
            M3IDX_ERR_INVALID_SIZE, NULL, "slot");
    refused(m3idx_page_decode(pages, bad[i], out.data), M3IDX_ERR_INVALID_SIZE,
            M3IDX_ERR_INVALID_SIZE, NULL, "slot");
  }
}
END_TEST

START_TEST(work_map_capacity_counts) {
  int32_t *cap = out.data;
  static const char *names[] = {"max_reqs", "max_blocks", "query_len", "num_heads"};
  static const int32_t bad[] = {INT32_MIN, -1, 0};
  for (int a = 0; a < 4; a++)
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
      int32_t v[4] = {8, 64, 1, 1};
      v[a] = bad[i];
      refused(m3idx_work_map_capacity(v[0], v[1], v[2], v[3], cap), M3IDX_ERR_INVALID_SIZE,
              M3IDX_ERR_INVALID_SIZE, NULL, names[a]);
    }
  /* INT32_MAX blocks is past 2^24; INT32_MAX requests of 2^24 blocks past int32 entries. */
  refused(m3idx_work_map_capacity(8, INT32_MAX, 1, 1, cap), M3IDX_ERR_INVALID_SIZE,
          M3IDX_ERR_INVALID_SIZE, NULL, "max_blocks");
  refused(m3idx_work_map_capacity(INT32_MAX, 1 << 24, 1, 1, cap), M3IDX_ERR_INVALID_SIZE,
          M3IDX_ERR_INVALID_SIZE, NULL, "entries");
  refused(m3idx_work_map_capacity(INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX, cap),
          M3IDX_ERR_INVALID_SIZE, M3IDX_ERR_INVALID_SIZE, NULL, "max_blocks");
  /* The largest sizes that are sound still give a capacity. */
  ck_assert_int_eq(m3idx_work_map_capacity(1, 1 << 24, INT32_MAX, INT32_MAX, cap), M3IDX_OK);
  ck_assert_int_ge(*cap, 1);
}
END_TEST

START_TEST(work_map_build_capacity) {
  m3idx_batch b = decode_batch();
  static const int32_t bad[] = {INT32_MIN, -1, 0};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    refused(m3idx_work_map_build(ctx, &b, out.data, bad[i]), M3IDX_ERR_INVALID_SIZE,
            M3IDX_ERR_INVALID_SIZE, ctx, "work_map_capacity");
}
END_TEST

START_TEST(context_limits) {
  static const int32_t bad[] = {INT32_MIN, -1, 0};
  for (int a = 0; a < 6; a++)
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
      m3idx_options o;
      m3idx_options_init(&o);
      o.backend = M3IDX_BACKEND_CPU;
      int32_t *field[] = {&o.max_reqs, &o.max_model_len, &o.max_rows,
                          &o.max_heads, &o.threads, &o.device};
      static const char *names[] = {"max_reqs", "max_model_len", "max_rows",
                                    "max_heads", "threads", "device"};
      if (a >= 4 && bad[i] == 0)
        continue; /* 0 threads is the default, device 0 the first */
      *field[a] = bad[i];
      m3idx_context *c = (m3idx_context *)out.data;
      ck_assert_int_eq(m3idx_context_create(&o, &c), M3IDX_ERR_INVALID_SIZE);
      ck_assert_ptr_null(c);
      ck_assert_msg(strstr(m3idx_last_error(NULL), names[a]), "%s", m3idx_last_error(NULL));
    }
  /* Every limit at INT32_MAX: refused (a limit or no memory), never an
     overflowed size that happens to allocate. */
  m3idx_options o;
  m3idx_options_init(&o);
  o.backend = M3IDX_BACKEND_CPU;
  o.max_reqs = o.max_model_len = o.max_rows = o.max_heads = INT32_MAX;
  m3idx_context *c = NULL;
  m3idx_status st = m3idx_context_create(&o, &c);
  ck_assert_msg(st == M3IDX_ERR_LIMIT || st == M3IDX_ERR_NO_MEMORY, "status %d", (int)st);
  ck_assert_ptr_null(c);
  /* Limits whose scratch size (rows x heads x width floats) would wrap
     around 64 bits are refused as limits, naming them. */
  o.max_reqs = 1;
  o.max_rows = o.max_heads = 1 << 19;
  ck_assert_int_eq(m3idx_context_create(&o, &c), M3IDX_ERR_LIMIT);
  ck_assert_msg(strstr(m3idx_last_error(NULL), "max_heads"), "%s", m3idx_last_error(NULL));
  o.max_rows = o.max_heads = 1;
  o.threads = INT32_MAX;
  ck_assert_int_eq(m3idx_context_create(&o, &c), M3IDX_ERR_INVALID_SIZE);
  ck_assert_msg(strstr(m3idx_last_error(NULL), "threads"), "%s", m3idx_last_error(NULL));
}
END_TEST

/* The batch's counts, the kcache's, and the forced-block counts, through
 * every call that takes a batch. */
typedef m3idx_status (*batch_call)(m3idx_batch *b, m3idx_kcache *k, int32_t init,
                                   int32_t local, int64_t stride);

static m3idx_status call_score_decode(m3idx_batch *b, m3idx_kcache *k, int32_t i, int32_t l,
                                      int64_t s) {
  return m3idx_score_decode(ctx, b, &q, k, NULL, 0, out.data, s);
}
static m3idx_status call_score_prefill(m3idx_batch *b, m3idx_kcache *k, int32_t i, int32_t l,
                                       int64_t s) {
  return m3idx_score_prefill(ctx, b, &q, k, out.data, s);
}
static m3idx_status call_pin(m3idx_batch *b, m3idx_kcache *k, int32_t i, int32_t l, int64_t s) {
  return m3idx_pin_forced_blocks(ctx, b, i, l, out.data, s);
}
static m3idx_status call_topk(m3idx_batch *b, m3idx_kcache *k, int32_t i, int32_t l, int64_t s) {
  static float scores[2 * 4 * 3];
  return m3idx_topk_from_scores(ctx, b, scores, s, out.data);
}
static m3idx_status call_fused_decode(m3idx_batch *b, m3idx_kcache *k, int32_t i, int32_t l,
                                      int64_t s) {
  int32_t *topk = out.data;
  return m3idx_index_topk_decode(ctx, b, &q, k, i, l, NULL, 0, topk, (float *)(topk + 256), s);
}
static m3idx_status call_fused_prefill(m3idx_batch *b, m3idx_kcache *k, int32_t i, int32_t l,
                                       int64_t s) {
  int32_t *topk = out.data;
  return m3idx_index_topk_prefill(ctx, b, &q, k, i, l, topk, (float *)(topk + 256), s);
}

struct call_kind {
  const char *name;
  batch_call call;
  int decode, keys, forced;
};
static const struct call_kind calls[] = {
    {"m3idx_score_decode", call_score_decode, 1, 1, 0},
    {"m3idx_score_prefill", call_score_prefill, 0, 1, 0},
    {"m3idx_pin_forced_blocks", call_pin, 1, 0, 1},
    {"m3idx_topk_from_scores", call_topk, 1, 0, 0},
    {"m3idx_index_topk_decode", call_fused_decode, 1, 1, 1},
    {"m3idx_index_topk_prefill", call_fused_prefill, 0, 1, 1},
};

START_TEST(batch_counts) {
  const struct call_kind *k = &calls[_i];
  struct {
    const char *name;
    int field; /* 0 num_reqs 1 num_heads 2 num_rows 3 max_seq_len 4 query_len */
    int32_t value;
    m3idx_status want, also;
  } cases[] = {
      {"num_reqs", 0, INT32_MIN, M3IDX_ERR_INVALID_SIZE, M3IDX_ERR_INVALID_SIZE},
      {"num_reqs", 0, INT32_MAX, M3IDX_ERR_LIMIT, M3IDX_ERR_LIMIT},
      {"num_heads", 1, INT32_MIN, M3IDX_ERR_INVALID_SIZE, M3IDX_ERR_INVALID_SIZE},
      {"num_heads", 1, INT32_MAX, M3IDX_ERR_LIMIT, M3IDX_ERR_LIMIT},
      {"num_rows", 2, INT32_MIN, M3IDX_ERR_INVALID_SIZE, M3IDX_ERR_INVALID_SIZE},
      {"num_rows", 2, INT32_MAX, M3IDX_ERR_INCONSISTENT, M3IDX_ERR_LIMIT},
      {"max_seq_len", 3, INT32_MIN, M3IDX_ERR_INVALID_SIZE, M3IDX_ERR_INVALID_SIZE},
      {"max_seq_len", 3, INT32_MAX, M3IDX_ERR_LIMIT, M3IDX_ERR_LIMIT},
      {"query_len", 4, INT32_MIN, M3IDX_ERR_INVALID_SIZE, M3IDX_ERR_INVALID_SIZE},
      {"query_len", 4, INT32_MAX, M3IDX_ERR_INCONSISTENT, M3IDX_ERR_INCONSISTENT},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (cases[i].field == 4 && !k->decode)
      continue;
    m3idx_batch b = k->decode ? decode_batch() : prefill_batch();
    m3idx_kcache kc = kcache();
    int32_t *f[] = {&b.num_reqs, &b.num_heads, &b.num_rows, &b.max_seq_len, &b.query_len};
    *f[cases[i].field] = cases[i].value;
    refused(k->call(&b, &kc, 0, 1, 0), cases[i].want, cases[i].also, ctx, cases[i].name);
  }
  /* Strides: INT64_MAX cannot be addressed, INT64_MIN and -1 are negative. */
  static const int64_t strides[] = {INT64_MAX, INT64_MAX / 2, INT64_MIN, -1};
  for (size_t i = 0; i < sizeof strides / sizeof strides[0]; i++) {
    m3idx_batch b = k->decode ? decode_batch() : prefill_batch();
    m3idx_kcache kc = kcache();
    refused(k->call(&b, &kc, 0, 1, strides[i]), M3IDX_ERR_INVALID_SIZE, M3IDX_ERR_INVALID_SIZE,
            ctx, strides[i] < 0 ? "score_stride" : "stride");
  }
  if (k->keys) {
    static const int32_t bad[] = {INT32_MIN, -1, 0};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
      m3idx_batch b = k->decode ? decode_batch() : prefill_batch();
      m3idx_kcache kc = kcache();
      kc.bt_stride = bad[i];
      refused(k->call(&b, &kc, 0, 1, 0), M3IDX_ERR_INVALID_SIZE, M3IDX_ERR_INVALID_SIZE, ctx,
              "bt_stride");
      kc = kcache();
      kc.num_pages = bad[i] == 0 ? INT32_MIN + 1 : bad[i];
      refused(k->call(&b, &kc, 0, 1, 0), M3IDX_ERR_INVALID_SIZE, M3IDX_ERR_INVALID_SIZE, ctx,
              "num_pages");
    }
    /* A block-table stride of INT32_MAX is sound (only the columns the
       requests need are read); page ids past num_pages are not. */
    m3idx_batch b = k->decode ? decode_batch() : prefill_batch();
    m3idx_kcache kc = kcache();
    kc.num_pages = 1;
    refused(k->call(&b, &kc, 0, 1, 0), M3IDX_ERR_PAGE_ID, M3IDX_ERR_PAGE_ID, ctx, "block_table");
    /* Lengths: the largest int32, the most negative. */
    int32_t keep = seq_lens[0];
    seq_lens[0] = INT32_MAX;
    refused(k->call(&b, &kc, 0, 1, 0), M3IDX_ERR_INCONSISTENT, M3IDX_ERR_INCONSISTENT, ctx,
            "seq_lens");
    seq_lens[0] = INT32_MIN;
    refused(k->call(&b, &kc, 0, 1, 0), M3IDX_ERR_INCONSISTENT, M3IDX_ERR_INVALID_SIZE, ctx,
            "seq_lens");
    seq_lens[0] = keep;
  }
  if (k->forced) {
    static const int32_t bad[][2] = {{INT32_MAX, INT32_MAX}, {INT32_MIN, 1}, {1, INT32_MIN},
                                      {INT32_MAX, 0}, {0, INT32_MAX}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
      m3idx_batch b = k->decode ? decode_batch() : prefill_batch();
      m3idx_kcache kc = kcache();
      refused(k->call(&b, &kc, bad[i][0], bad[i][1], 0), M3IDX_ERR_FORCED_BLOCKS,
              M3IDX_ERR_FORCED_BLOCKS, ctx, "init_blocks");
    }
  }
}
END_TEST

START_TEST(prefill_lengths) {
  /* cu_seqlens_q and context_lens at the ends of int32: their differences
     are taken in 64 bits. */
  struct {
    int32_t *at, value;
    m3idx_status want;
    const char *name;
  } cases[] = {
      {&cu[1], INT32_MAX, M3IDX_ERR_INCONSISTENT, "cu_seqlens_q"},
      {&cu[1], INT32_MIN, M3IDX_ERR_INCONSISTENT, "cu_seqlens_q"},
      {&context_lens[0], INT32_MIN, M3IDX_ERR_INVALID_SIZE, "context_lens"},
      {&context_lens[0], INT32_MAX, M3IDX_ERR_INCONSISTENT, "context_lens"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    m3idx_batch b = prefill_batch();
    m3idx_kcache kc = kcache();
    int32_t keep = *cases[i].at;
    *cases[i].at = cases[i].value;
    refused(call_score_prefill(&b, &kc, 0, 1, 0), cases[i].want, cases[i].want, ctx,
            cases[i].name);
    *cases[i].at = keep;
  }
}
END_TEST

START_TEST(config_reason) {
  ck_assert_ptr_nonnull(m3idx_config_unsupported_reason(INT32_MAX, 128, 128, "max"));
  ck_assert_ptr_nonnull(m3idx_config_unsupported_reason(16, INT32_MIN, 128, "max"));
  ck_assert_ptr_nonnull(m3idx_config_unsupported_reason(16, 128, INT32_MAX, "max"));
  ck_assert_ptr_nonnull(m3idx_config_unsupported_reason(-1, -1, -1, NULL));
  ck_assert_ptr_null(m3idx_config_unsupported_reason(16, 128, 128, "max"));
}
END_TEST

/* A batch with no rows sizes nothing: heads and max_seq_len past the
 * context's limits, a 1-column block table for a request of 2^31 - 1
 * tokens, and a stride below the width are all fine, and nothing is
 * written (the issue: 0 rows x 4194304 heads failed with "no memory"). */
START_TEST(no_rows_sizes_nothing) {
  int32_t zero_cu[3] = {0, 0, 0}, sl[2] = {INT32_MAX, 5}, cl[2] = {INT32_MAX, 5};
  int32_t bt[2] = {0, 0};
  m3idx_batch b = {.mode = M3IDX_MODE_PREFILL, .num_reqs = 2, .num_heads = 4194304,
                   .num_rows = 0, .max_seq_len = INT32_MAX, .seq_lens = sl,
                   .cu_seqlens_q = zero_cu, .context_lens = cl};
  m3idx_kcache kc = {pages, 1, bt, 1};
  int32_t *topk = out.data;
  float *scores = (float *)(topk + 256);
  ck_assert_int_eq(m3idx_index_topk_prefill(ctx, &b, &q, &kc, 0, 1, topk, scores, 1), M3IDX_OK);
  ck_assert_int_eq(m3idx_score_prefill(ctx, &b, &q, &kc, scores, 0), M3IDX_OK);
  ck_assert_int_eq(m3idx_pin_forced_blocks(ctx, &b, 0, 1, scores, 0), M3IDX_OK);
  ck_assert_int_eq(m3idx_topk_from_scores(ctx, &b, scores, 0, topk), M3IDX_OK);
  ck_assert(guarded_intact(&out, FILL, 1));
  /* Still checked: the lengths, and the limits that a row-less batch has. */
  cl[1] = 4;
  refused(m3idx_score_prefill(ctx, &b, &q, &kc, scores, 0), M3IDX_ERR_INCONSISTENT,
          M3IDX_ERR_INCONSISTENT, ctx, "context_lens");
  cl[1] = 5;
  b.num_reqs = 5;
  refused(m3idx_score_prefill(ctx, &b, &q, &kc, scores, 0), M3IDX_ERR_LIMIT, M3IDX_ERR_LIMIT,
          ctx, "num_reqs");
}
END_TEST

int main(void) {
  Suite *s = suite_create("sizes");
  TCase *tc = tcase_create("sizes");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, encode_keys_counts);
  tcase_add_test(tc, page_slot);
  tcase_add_test(tc, work_map_capacity_counts);
  tcase_add_test(tc, work_map_build_capacity);
  tcase_add_test(tc, context_limits);
  tcase_add_loop_test(tc, batch_counts, 0, (int)(sizeof calls / sizeof calls[0]));
  tcase_add_test(tc, prefill_lengths);
  tcase_add_test(tc, config_reason);
  tcase_add_test(tc, no_rows_sizes_nothing);
  suite_add_tcase(s, tc);
  return run_suite(s);
}
