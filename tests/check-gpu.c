/*
 * check-gpu.c - the HIP backend against the CPU reference, byte for byte
 * (memcmp on every top-k slot and every causal score, guard bytes around
 * every output): every call pattern of patterns.c with host pointers,
 * then device pointers, a captured graph replayed with changing seq_lens,
 * the top-k kernel on rows of every length class, and bad input in device
 * memory reported by m3idx_synchronize.
 * Exits 77 (skip) with the reason when no usable GPU is present.
 *
 * SPDX-License-Identifier: MIT
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devtools.h"
#include "patterns.h"
#include "results.h"

#define FILL 0xa5
#define GUARD 256

static const struct m3idx_devtools *dt;
static char err[512];

#define DT(call) ck_assert_msg((call) == 0, "%s", err)

/* ---- host pointers: every pattern ---------------------------------------- */

static m3idx_context *make_ctx(const struct test_case *tc, m3idx_backend backend, uint32_t flags,
                               void *stream) {
  m3idx_options o;
  m3idx_context *ctx = NULL;
  case_options(tc, &o);
  o.backend = backend;
  o.flags = flags;
  o.stream = stream;
  ck_assert_msg(m3idx_context_create(&o, &ctx) == M3IDX_OK, "%s", m3idx_last_error(NULL));
  return ctx;
}

static void hip_vs_cpu(struct test_case *tc, void *arg) {
  (void)arg;
  char why[512];
  struct case_results cpu, hip;
  m3idx_context *c = make_ctx(tc, M3IDX_BACKEND_CPU, 0, NULL);
  m3idx_context *g = make_ctx(tc, M3IDX_BACKEND_HIP, M3IDX_FLAG_HOST_POINTERS, NULL);
  ck_assert_msg(results_from_library(c, tc, &cpu, why, sizeof why) == 0, "cpu: %s", why);
  ck_assert_msg(results_from_library(g, tc, &hip, why, sizeof why) == 0, "hip: %s", why);
  ck_assert_msg(results_compare(tc, &hip, &cpu, why, sizeof why) == 0, "hip vs cpu: %s", why);
  results_free(&cpu);
  results_free(&hip);
  m3idx_context_destroy(c);
  m3idx_context_destroy(g);
  case_free(tc);
}

START_TEST(pattern_hip_vs_cpu) { patterns_run(_i, 1, hip_vs_cpu, NULL); }
END_TEST

/* ---- device pointers ---------------------------------------------------- */

/* A device buffer with GUARD bytes of FILL on each side. */
struct dbuf {
  unsigned char *raw;
  void *p;
  size_t bytes;
};

static void dbuf_make(struct dbuf *b, const void *host, size_t bytes) {
  b->bytes = bytes;
  DT(dt->alloc((void **)&b->raw, bytes + 2 * GUARD, err, sizeof err));
  DT(dt->fill(b->raw, FILL, bytes + 2 * GUARD, err, sizeof err));
  b->p = b->raw + GUARD;
  if (host && bytes)
    DT(dt->to_device(b->p, host, bytes, err, sizeof err));
}

/* Copy back; fail if a guard byte changed. */
static void dbuf_fetch(const struct dbuf *b, void *host, const char *what) {
  unsigned char *all = malloc(b->bytes + 2 * GUARD);
  DT(dt->to_host(all, b->raw, b->bytes + 2 * GUARD, err, sizeof err));
  for (size_t i = 0; i < GUARD; i++)
    ck_assert_msg(all[i] == FILL && all[GUARD + b->bytes + i] == FILL,
                  "%s: a write outside the buffer", what);
  memcpy(host, all + GUARD, b->bytes);
  free(all);
}

static void dbuf_free(struct dbuf *b) { dt->release(b->raw); }

struct dev_case {
  struct dbuf seq, cu, ctx, query, pages, bt, scores, topk, map;
  m3idx_batch batch;
  m3idx_query query_d;
  m3idx_kcache kcache;
  int64_t stride;
  int32_t cap;
};

static void upload(const struct test_case *tc, struct dev_case *d) {
  const m3idx_batch *b = &tc->batch;
  size_t R = (size_t)b->num_reqs;
  memset(d, 0, sizeof *d);
  d->stride = oracle_width(&tc->oc) + 3;
  dbuf_make(&d->seq, tc->seq_lens, R * 4);
  if (b->mode == M3IDX_MODE_PREFILL) {
    dbuf_make(&d->cu, tc->cu_seqlens_q, (R + 1) * 4);
    dbuf_make(&d->ctx, tc->context_lens, R * 4);
  }
  size_t qbytes = (size_t)b->num_rows * b->num_heads * 128 * (tc->query.dtype == M3IDX_DTYPE_BF16 ? 2 : 1);
  dbuf_make(&d->query, tc->query_data, qbytes);
  dbuf_make(&d->pages, tc->pages, (size_t)tc->kcache.num_pages * M3IDX_PAGE_BYTES);
  dbuf_make(&d->bt, tc->block_table, R * (size_t)tc->kcache.bt_stride * 4);
  size_t nrow = (size_t)b->num_heads * (size_t)b->num_rows;
  dbuf_make(&d->scores, NULL, nrow * (size_t)d->stride * 4);
  dbuf_make(&d->topk, NULL, nrow * M3IDX_TOPK * 4);
  if (b->mode == M3IDX_MODE_DECODE) {
    ck_assert_int_eq(m3idx_work_map_capacity(b->num_reqs, (b->max_seq_len + 127) / 128,
                                             b->query_len, b->num_heads, &d->cap), M3IDX_OK);
    dbuf_make(&d->map, NULL, (size_t)d->cap * 8);
  }
  d->batch = *b;
  d->batch.seq_lens = d->seq.p;
  d->batch.cu_seqlens_q = b->mode == M3IDX_MODE_PREFILL ? d->cu.p : NULL;
  d->batch.context_lens = b->mode == M3IDX_MODE_PREFILL ? d->ctx.p : NULL;
  d->query_d = tc->query;
  d->query_d.data = d->query.p;
  d->kcache = tc->kcache;
  d->kcache.pages = d->pages.p;
  d->kcache.block_table = d->bt.p;
}

static void release(struct dev_case *d) {
  struct dbuf *all[] = {&d->seq, &d->cu, &d->ctx, &d->query, &d->pages, &d->bt, &d->scores,
                        &d->topk, &d->map};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (all[i]->raw)
      dbuf_free(all[i]);
}

/* Fused call (with a built work map for decode) on device pointers. */
static m3idx_status fused_on_device(m3idx_context *g, const struct test_case *tc,
                                    struct dev_case *d) {
  if (tc->batch.mode == M3IDX_MODE_DECODE) {
    m3idx_status st = m3idx_work_map_build(g, &d->batch, d->map.p, d->cap);
    if (st != M3IDX_OK)
      return st;
    return m3idx_index_topk_decode(g, &d->batch, &d->query_d, &d->kcache, tc->init_blocks,
                                   tc->local_blocks, d->map.p, d->cap, d->topk.p, d->scores.p,
                                   d->stride);
  }
  return m3idx_index_topk_prefill(g, &d->batch, &d->query_d, &d->kcache, tc->init_blocks,
                                  tc->local_blocks, d->topk.p, d->scores.p, d->stride);
}

static void device_vs_cpu(struct test_case *tc, void *arg) {
  (void)arg;
  char why[512];
  struct case_results cpu, hip;
  m3idx_context *c = make_ctx(tc, M3IDX_BACKEND_CPU, 0, NULL);
  ck_assert_msg(results_from_library(c, tc, &cpu, why, sizeof why) == 0, "cpu: %s", why);
  m3idx_context_destroy(c);
  void *stream = NULL;
  DT(dt->stream_create(&stream, err, sizeof err));
  m3idx_context *g = make_ctx(tc, M3IDX_BACKEND_HIP, 0, stream);
  struct dev_case d;
  upload(tc, &d);
  /* hip results: start from the cpu ones and overwrite what the device gives */
  memcpy(&hip, &cpu, sizeof hip);
  size_t nrow = (size_t)tc->batch.num_heads * tc->batch.num_rows;
  hip.fused_scores = malloc(d.scores.bytes + 1);
  hip.fused_topk = malloc(d.topk.bytes + 1);
  ck_assert_msg(fused_on_device(g, tc, &d) == M3IDX_OK, "%s", m3idx_last_error(g));
  ck_assert_msg(m3idx_synchronize(g) == M3IDX_OK, "%s", m3idx_last_error(g));
  dbuf_fetch(&d.scores, hip.fused_scores, "fused scores");
  dbuf_fetch(&d.topk, hip.fused_topk, "fused top-k");
  ck_assert_int_eq(memcmp(hip.fused_topk, cpu.fused_topk, nrow * M3IDX_TOPK * 4), 0);
  struct case_results only_fused = cpu;
  only_fused.fused_scores = hip.fused_scores;
  only_fused.fused_topk = hip.fused_topk;
  ck_assert_msg(results_compare(tc, &only_fused, &cpu, why, sizeof why) == 0,
                "device pointers vs cpu: %s", why);
  free(hip.fused_scores);
  free(hip.fused_topk);
  release(&d);
  m3idx_context_destroy(g);
  dt->stream_destroy(stream);
  results_free(&cpu);
  case_free(tc);
}

/* ---- verification: the same verdicts, bit for bit ------------------------ */

/* A candidate near m3idx's: every score one ulp up or down (seeded), ids
 * from them, and on every fifth row a block swapped in from past the
 * cut (wrong, or a near tie) so that every verdict shows up; then rows
 * with their order reversed, a score far off, a duplicate id and an id
 * past the row, so that every reason does too. */
static void near_candidate(m3idx_context *c, const struct test_case *tc, int64_t w,
                           float *scores, int32_t *ids) {
  const int64_t pairs = (int64_t)tc->batch.num_heads * tc->batch.num_rows;
  float *pinned = malloc(sizeof(float) * (size_t)(pairs * w));
  ck_assert_int_eq(tc->batch.mode == M3IDX_MODE_DECODE
                       ? m3idx_score_decode(c, &tc->batch, &tc->query, &tc->kcache, NULL, 0,
                                            scores, w)
                       : m3idx_score_prefill(c, &tc->batch, &tc->query, &tc->kcache, scores, w),
                   M3IDX_OK);
  uint64_t x = 0x9e3779b97f4a7c15ull ^ (uint64_t)pairs;
  for (int64_t i = 0; i < pairs * w; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    if (scores[i] == scores[i] && fabsf(scores[i]) < 1e30f)
      scores[i] = nextafterf(scores[i], x & 1 ? INFINITY : -INFINITY);
  }
  memcpy(pinned, scores, sizeof(float) * (size_t)(pairs * w));
  ck_assert_int_eq(m3idx_pin_forced_blocks(c, &tc->batch, tc->init_blocks, tc->local_blocks,
                                           pinned, w), M3IDX_OK);
  ck_assert_int_eq(m3idx_topk_from_scores(c, &tc->batch, pinned, w, ids), M3IDX_OK);
  for (int64_t hr = 0; hr < pairs; hr += 5)
    if (ids[hr * 16 + 15] >= 0) {
      const int32_t last = ids[hr * 16 + 15];
      ids[hr * 16 + 15] = -1;
      for (int32_t b = 0; b < w && ids[hr * 16 + 15] < 0; b++) {
        int in = b == last;
        for (int j = 0; j < 15; j++)
          in |= ids[hr * 16 + j] == b;
        if (!in && pinned[hr * w + b] == pinned[hr * w + b] && pinned[hr * w + b] > -INFINITY)
          ids[hr * 16 + 15] = b;
      }
      if (ids[hr * 16 + 15] < 0)
        ids[hr * 16 + 15] = last;
    }
  for (int64_t hr = 0; hr < pairs; hr++) {
    int32_t *row = ids + hr * 16;
    if (hr % 7 == 1)
      for (int j = 0; j < 8; j++) {
        const int32_t t = row[j];
        row[j] = row[15 - j];
        row[15 - j] = t;
      }
    if (hr % 7 == 2)
      for (int64_t b = w - 1; b >= 0; b--)
        if (fabsf(scores[hr * w + b]) < 1e30f) {
          scores[hr * w + b] = scores[hr * w + b] * 1.5f + 1.0f;
          break;
        }
    if (hr % 7 == 3 && row[3] >= 0)
      row[3] = row[2];
    if (hr % 11 == 4)
      row[0] = 1 << 20;
  }
  free(pinned);
}

static void verify_hip_vs_cpu(struct test_case *tc, const m3idx_verify_options *o,
                              int with_scores) {
  const int64_t pairs = (int64_t)tc->batch.num_heads * tc->batch.num_rows;
  const int64_t w = oracle_width(&tc->oc);
  float *scores = malloc(sizeof(float) * (size_t)(pairs * w));
  int32_t *ids = malloc(sizeof(int32_t) * 16 * (size_t)pairs);
  m3idx_verify_row *rows[3];
  m3idx_verify_summary sum[3];
  m3idx_context *c = make_ctx(tc, M3IDX_BACKEND_CPU, 0, NULL);
  near_candidate(c, tc, w, scores, ids);
  const float *cs = with_scores ? scores : NULL;
  for (int k = 0; k < 3; k++) {
    rows[k] = malloc(sizeof **rows * (size_t)pairs);
    memset(rows[k], 0x77, sizeof **rows * (size_t)pairs);
  }
  ck_assert_msg(m3idx_verify_topk(c, &tc->batch, &tc->query, &tc->kcache, tc->init_blocks,
                                  tc->local_blocks, ids, cs, w, o, rows[0], &sum[0]) ==
                    M3IDX_OK, "cpu: %s", m3idx_last_error(c));
  m3idx_context_destroy(c);
  /* Host pointers on the GPU. */
  m3idx_context *g = make_ctx(tc, M3IDX_BACKEND_HIP, M3IDX_FLAG_HOST_POINTERS, NULL);
  ck_assert_msg(m3idx_verify_topk(g, &tc->batch, &tc->query, &tc->kcache, tc->init_blocks,
                                  tc->local_blocks, ids, cs, w, o, rows[1], &sum[1]) ==
                    M3IDX_OK, "hip, host pointers: %s", m3idx_last_error(g));
  m3idx_context_destroy(g);
  /* Device pointers: the candidate too is read where it is. */
  void *stream = NULL;
  DT(dt->stream_create(&stream, err, sizeof err));
  g = make_ctx(tc, M3IDX_BACKEND_HIP, 0, stream);
  struct dev_case d;
  upload(tc, &d);
  struct dbuf cand, cand_s;
  dbuf_make(&cand, ids, sizeof(int32_t) * 16 * (size_t)pairs);
  dbuf_make(&cand_s, scores, sizeof(float) * (size_t)(pairs * w));
  /* Decode: with the fused call's work map, built on the device. */
  m3idx_verify_options od = *o;
  if (tc->batch.mode == M3IDX_MODE_DECODE) {
    ck_assert_int_eq(m3idx_work_map_build(g, &d.batch, d.map.p, d.cap), M3IDX_OK);
    od.work_map = d.map.p;
    od.work_map_capacity = d.cap;
  }
  ck_assert_msg(m3idx_verify_topk(g, &d.batch, &d.query_d, &d.kcache, tc->init_blocks,
                                  tc->local_blocks, cand.p, cs ? cand_s.p : NULL, w, &od,
                                  rows[2], &sum[2]) ==
                    M3IDX_OK, "hip, device pointers: %s", m3idx_last_error(g));
  for (int k = 1; k < 3; k++) {
    const int same_max = sum[k].max_score_deviation == sum[0].max_score_deviation ||
                         (sum[k].max_score_deviation != sum[k].max_score_deviation &&
                          sum[0].max_score_deviation != sum[0].max_score_deviation);
    ck_assert_msg(sum[k].rows == sum[0].rows && sum[k].exact == sum[0].exact &&
                      sum[k].equivalent == sum[0].equivalent && sum[k].wrong == sum[0].wrong &&
                      same_max,
                  "%s: summary %lld/%lld/%lld max %a, cpu %lld/%lld/%lld max %a",
                  k == 1 ? "host pointers" : "device pointers", (long long)sum[k].exact,
                  (long long)sum[k].equivalent, (long long)sum[k].wrong,
                  sum[k].max_score_deviation, (long long)sum[0].exact,
                  (long long)sum[0].equivalent, (long long)sum[0].wrong,
                  sum[0].max_score_deviation);
    for (int64_t hr = 0; hr < pairs; hr++)
      ck_assert_msg(memcmp(&rows[k][hr], &rows[0][hr], sizeof **rows) == 0,
                    "%s, row %lld: verdict %d reason %d slot %d blocks %d %d gap %a; cpu %d %d "
                    "%d %d %d %a", k == 1 ? "host pointers" : "device pointers", (long long)hr,
                    rows[k][hr].verdict, rows[k][hr].reason, rows[k][hr].slot,
                    rows[k][hr].block_a, rows[k][hr].block_b, rows[k][hr].gap,
                    rows[0][hr].verdict, rows[0][hr].reason, rows[0][hr].slot,
                    rows[0][hr].block_a, rows[0][hr].block_b, rows[0][hr].gap);
  }
  int seen[9] = {0};
  for (int64_t hr = 0; hr < pairs; hr++)
    seen[rows[0][hr].reason]++;
  printf("verify %s (%s): %lld exact, %lld equivalent, %lld wrong (reasons 1-8: %d %d %d %d "
         "%d %d %d %d), largest deviation %.3g: the same on the GPU\n",
         tc->batch.mode == M3IDX_MODE_DECODE ? "decode" : "prefill",
         !with_scores ? "ids" : o && (o->flags & M3IDX_VERIFY_NO_MAX_DEVIATION) ? "verdicts"
                                                                            : "scores",
         (long long)sum[0].exact, (long long)sum[0].equivalent, (long long)sum[0].wrong, seen[1],
         seen[2], seen[3], seen[4], seen[5], seen[6], seen[7], seen[8],
         sum[0].max_score_deviation);
  dbuf_free(&cand);
  dbuf_free(&cand_s);
  release(&d);
  m3idx_context_destroy(g);
  dt->stream_destroy(stream);
  for (int k = 0; k < 3; k++)
    free(rows[k]);
  free(scores);
  free(ids);
}

START_TEST(verify_same_verdicts) {
  static const int32_t lens[] = {2500, 129, 700, 4000, 9000};
  static const int32_t ctx[] = {0, 1500, 300}, q[] = {40, 30, 9};
  m3idx_verify_options e4m3, plain, verdicts;
  m3idx_verify_options_init(&e4m3);
  e4m3.query_rounding = M3IDX_QUERY_ROUNDING_E4M3;
  e4m3.order = M3IDX_ORDER_ANY;
  m3idx_verify_options_init(&plain);
  verdicts = plain;
  verdicts.flags = M3IDX_VERIFY_NO_MAX_DEVIATION;
  for (int i = 0; i < 6; i++) {
    const int flavor = i % 3 == 0 ? FLAVOR_TIES : i % 3 == 1 ? FLAVOR_PLAIN : FLAVOR_SPECIAL;
    const m3idx_dtype dt_q = i % 2 ? M3IDX_DTYPE_E4M3 : M3IDX_DTYPE_BF16;
    struct test_case *tc = i % 2 ? case_prefill(9100u + (uint64_t)i, flavor, 2, dt_q, 3, ctx, q)
                                 : case_decode(9100u + (uint64_t)i, flavor, 3, 2, dt_q, 5, lens);
    case_set_forced(tc, i % 3 == 0 ? 1 : 0, 1);
    verify_hip_vs_cpu(tc, i >= 4 ? &e4m3 : &plain, 1);
    verify_hip_vs_cpu(tc, &verdicts, 1);
    verify_hip_vs_cpu(tc, &plain, 0);
    case_free(tc);
  }
}
END_TEST

START_TEST(device_pointers) {
  /* A few patterns, each case through device buffers. */
  static const char *names[] = {"decode_query_lens", "prefill_context", "special_values",
                                "forced_blocks", "large"};
  for (int p = 0; p < m3idx_npatterns; p++)
    for (size_t n = 0; n < sizeof names / sizeof names[0]; n++)
      if (!strcmp(m3idx_patterns[p].name, names[n]))
        m3idx_patterns[p].make(_i % m3idx_patterns[p].variants, device_vs_cpu, NULL);
}
END_TEST

/* ---- a captured graph, replayed while seq_lens grow ---------------------- */

START_TEST(graph_replay) {
  enum { REQS = 6, STEPS = 5, QLEN = 2, H = 2 };
  int32_t final_lens[REQS] = {3000, 130, 70000, 2048, 5, 16384};
  struct test_case *tc = case_decode(12000u, FLAVOR_PLAIN, H, QLEN, M3IDX_DTYPE_BF16, REQS,
                                     final_lens);
  void *stream = NULL;
  DT(dt->stream_create(&stream, err, sizeof err));
  m3idx_context *g = make_ctx(tc, M3IDX_BACKEND_HIP, 0, stream);
  m3idx_context *c = make_ctx(tc, M3IDX_BACKEND_CPU, 0, NULL);
  struct dev_case d;
  upload(tc, &d);
  /* The graph: rebuild the map from seq_lens, then the fused call. */
  DT(dt->capture_begin(stream, err, sizeof err));
  ck_assert_int_eq(fused_on_device(g, tc, &d), M3IDX_OK);
  void *graph = NULL;
  DT(dt->capture_end(stream, &graph, err, sizeof err));
  size_t nrow = (size_t)H * REQS * QLEN;
  int32_t *want = malloc(nrow * M3IDX_TOPK * 4), *got = malloc(d.topk.bytes);
  float *sw = malloc(d.scores.bytes), *sg = malloc(d.scores.bytes);
  for (int step = 0; step < STEPS; step++) {
    int32_t lens[REQS];
    for (int r = 0; r < REQS; r++) /* each step a few tokens later */
      lens[r] = final_lens[r] - (STEPS - 1 - step) * (r + 1) < QLEN
                    ? QLEN
                    : final_lens[r] - (STEPS - 1 - step) * (r + 1);
    memcpy(tc->seq_lens, lens, sizeof lens);
    DT(dt->to_device(d.seq.p, lens, sizeof lens, err, sizeof err));
    DT(dt->graph_launch(graph, stream, err, sizeof err));
    ck_assert_msg(m3idx_synchronize(g) == M3IDX_OK, "%s", m3idx_last_error(g));
    dbuf_fetch(&d.topk, got, "graph top-k");
    dbuf_fetch(&d.scores, sg, "graph scores");
    memcpy(sw, sg, d.scores.bytes);
    ck_assert_int_eq(m3idx_index_topk_decode(c, &tc->batch, &tc->query, &tc->kcache,
                                             tc->init_blocks, tc->local_blocks, NULL, 0, want,
                                             sw, d.stride), M3IDX_OK);
    ck_assert_msg(memcmp(got, want, nrow * M3IDX_TOPK * 4) == 0, "step %d: top-k differ", step);
    ck_assert_msg(memcmp(sg, sw, d.scores.bytes) == 0, "step %d: scores differ", step);
  }
  free(want);
  free(got);
  free(sw);
  free(sg);
  dt->graph_destroy(graph);
  release(&d);
  m3idx_context_destroy(g);
  m3idx_context_destroy(c);
  dt->stream_destroy(stream);
  case_free(tc);
}
END_TEST

/* ---- the top-k kernel's row lengths ------------------------------------- */

/* Rows of lengths around the top-k kernel's strides: shorter than a
 * warp, not a multiple of its 512 threads, 4K and 8K blocks (multiples),
 * one less, one more and longer; at a stride that keeps every row
 * 16-byte aligned (_i 0) and at one that does not (_i 1).
 * Scores with ties, NaN, infinities and values the clamp changes, and
 * two rows of one value (the radix select).  The top-k, pinning, and the
 * top-k of the pinned scores on the GPU against the CPU, byte for byte. */
START_TEST(topk_row_lengths) {
  static const int32_t blocks[] = {1, 3, 17, 1021, 4096, 8191, 8192, 8193, 20000};
  enum { R = sizeof blocks / sizeof blocks[0], H = 2 };
  int32_t lens[R], maxlen = 0;
  for (int r = 0; r < R; r++) {
    lens[r] = blocks[r] * 128 - 5 * (r % 3); /* still blocks[r] blocks */
    maxlen = lens[r] > maxlen ? lens[r] : maxlen;
  }
  const m3idx_batch b = {.mode = M3IDX_MODE_DECODE, .num_reqs = R, .num_heads = H,
                         .num_rows = R, .max_seq_len = maxlen, .seq_lens = lens,
                         .query_len = 1};
  const int64_t stride = (maxlen + 127) / 128 + _i; /* 20000 (aligned rows) or 20001 */
  const size_t n = (size_t)H * R * (size_t)stride, ids = (size_t)H * R * M3IDX_TOPK;
  float *base = malloc(n * sizeof(float)), *sc = malloc(n * sizeof(float)),
        *sg = malloc(n * sizeof(float));
  int32_t *ic = malloc(ids * 4), *ig = malloc(ids * 4);
  uint64_t x = 0x2545f4914f6cdd1dull;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const unsigned k = (unsigned)(x % 1000u);
    base[i] = k == 0 ? NAN : k == 1 ? INFINITY : k == 2 ? -INFINITY : k == 3 ? 3e30f
            : (float)(x % 4001u) / 8.0f - 250.0f;
  }
  for (int r = 6; r < R; r += 2) /* head 1 of 8192 and 20000 blocks: one value */
    for (int64_t j = 0; j < stride; j++)
      base[(size_t)(R + r) * (size_t)stride + (size_t)j] = 7.0f;
  m3idx_options o;
  m3idx_options_init(&o);
  o.max_reqs = R, o.max_model_len = maxlen, o.max_rows = R, o.max_heads = H;
  m3idx_context *c = NULL, *g = NULL;
  o.backend = M3IDX_BACKEND_CPU;
  ck_assert_msg(m3idx_context_create(&o, &c) == M3IDX_OK, "%s", m3idx_last_error(NULL));
  o.backend = M3IDX_BACKEND_HIP, o.flags = M3IDX_FLAG_HOST_POINTERS;
  ck_assert_msg(m3idx_context_create(&o, &g) == M3IDX_OK, "%s", m3idx_last_error(NULL));
  for (int pass = 0; pass < 2; pass++) {
    const float *in_c = pass ? sc : base, *in_g = pass ? sg : base;
    if (pass) { /* pinned: init 1, local 2 */
      memcpy(sc, base, n * sizeof(float));
      memcpy(sg, base, n * sizeof(float));
      ck_assert_int_eq(m3idx_pin_forced_blocks(c, &b, 1, 2, sc, stride), M3IDX_OK);
      ck_assert_msg(m3idx_pin_forced_blocks(g, &b, 1, 2, sg, stride) == M3IDX_OK, "%s",
                    m3idx_last_error(g));
      for (int hr = 0; hr < H * R; hr++)
        ck_assert_msg(!memcmp(sc + (size_t)hr * (size_t)stride, sg + (size_t)hr * (size_t)stride,
                              sizeof(float) * (size_t)blocks[hr % R]),
                      "pinned scores of head %d, row %d (%d blocks) differ", hr / R, hr % R,
                      (int)blocks[hr % R]);
    }
    ck_assert_int_eq(m3idx_topk_from_scores(c, &b, in_c, stride, ic), M3IDX_OK);
    memset(ig, 0x5a, ids * 4);
    ck_assert_msg(m3idx_topk_from_scores(g, &b, in_g, stride, ig) == M3IDX_OK, "%s",
                  m3idx_last_error(g));
    for (int hr = 0; hr < H * R; hr++) {
      const int32_t *want = ic + hr * M3IDX_TOPK, *got = ig + hr * M3IDX_TOPK;
      int k = 0;
      while (k < M3IDX_TOPK && want[k] == got[k])
        k++;
      ck_assert_msg(k == M3IDX_TOPK,
                    "%s top-k of head %d, row %d (%d blocks, stride %d): slot %d is %d, the "
                    "CPU's %d", pass ? "pinned" : "raw", hr / R, hr % R, (int)blocks[hr % R],
                    (int)stride, k, got[k < M3IDX_TOPK ? k : 0], want[k < M3IDX_TOPK ? k : 0]);
    }
  }
  m3idx_context_destroy(c);
  m3idx_context_destroy(g);
  free(base);
  free(sc);
  free(sg);
  free(ic);
  free(ig);
}
END_TEST

/* ---- bad input in device memory ----------------------------------------- */

START_TEST(device_bad_input) {
  int32_t lens[3] = {300, 1000, 129};
  struct test_case *tc = case_decode(13000u, FLAVOR_PLAIN, 1, 1, M3IDX_DTYPE_BF16, 3, lens);
  m3idx_context *g = make_ctx(tc, M3IDX_BACKEND_HIP, 0, NULL);
  struct dev_case d;
  upload(tc, &d);
  /* A page id past the end in a causal block. */
  int32_t bad = tc->kcache.num_pages + 5;
  DT(dt->to_device((int32_t *)d.bt.p + tc->kcache.bt_stride + 3, &bad, 4, err, sizeof err));
  ck_assert_int_eq(fused_on_device(g, tc, &d), M3IDX_OK);
  ck_assert_int_eq(m3idx_synchronize(g), M3IDX_ERR_DEVICE_INPUT);
  ck_assert_ptr_nonnull(strstr(m3idx_last_error(g), "block_table"));
  ck_assert_int_eq(m3idx_synchronize(g), M3IDX_OK); /* reported once */
  {
    /* Verifying reads the same memory: its call fails, the rows and the
       summary untouched, and the error is not reported again. */
    int32_t cand[3 * M3IDX_TOPK];
    for (int i = 0; i < 3 * M3IDX_TOPK; i++)
      cand[i] = i % M3IDX_TOPK < 3 ? i % M3IDX_TOPK : -1;
    struct dbuf cb;
    dbuf_make(&cb, cand, sizeof cand);
    m3idx_verify_row rows[3];
    m3idx_verify_summary sum;
    memset(rows, 0x5a, sizeof rows);
    memset(&sum, 0x5a, sizeof sum);
    ck_assert_int_eq(m3idx_verify_topk(g, &d.batch, &d.query_d, &d.kcache, tc->init_blocks,
                                       tc->local_blocks, cb.p, NULL, 0, NULL, rows, &sum),
                     M3IDX_ERR_DEVICE_INPUT);
    ck_assert_ptr_nonnull(strstr(m3idx_last_error(g), "block_table"));
    for (size_t i = 0; i < sizeof rows; i++)
      ck_assert_int_eq(((unsigned char *)rows)[i], 0x5a);
    for (size_t i = 0; i < sizeof sum; i++)
      ck_assert_int_eq(((unsigned char *)&sum)[i], 0x5a);
    ck_assert_int_eq(m3idx_synchronize(g), M3IDX_OK);
    dbuf_free(&cb);
  }
  /* query_len > seq_len. */
  int32_t one = 0;
  DT(dt->to_device(d.seq.p, &one, 4, err, sizeof err));
  ck_assert_int_eq(m3idx_work_map_build(g, &d.batch, d.map.p, d.cap), M3IDX_OK);
  ck_assert_int_eq(m3idx_synchronize(g), M3IDX_ERR_DEVICE_INPUT);
  ck_assert_ptr_nonnull(strstr(m3idx_last_error(g), "seq_lens"));
  /* A work map too small for the batch. */
  DT(dt->to_device(d.seq.p, lens, sizeof lens, err, sizeof err));
  ck_assert_int_eq(m3idx_work_map_build(g, &d.batch, d.map.p, 1), M3IDX_OK);
  ck_assert_int_eq(m3idx_synchronize(g), M3IDX_ERR_DEVICE_INPUT);
  ck_assert_ptr_nonnull(strstr(m3idx_last_error(g), "capacity"));
  /* A stale work map entry (a request that does not exist). */
  int32_t entry[2] = {7, 1 << 24};
  ck_assert_int_eq(m3idx_work_map_build(g, &d.batch, d.map.p, d.cap), M3IDX_OK);
  DT(dt->to_device(d.map.p, entry, sizeof entry, err, sizeof err));
  ck_assert_int_eq(m3idx_score_decode(g, &d.batch, &d.query_d, &d.kcache, d.map.p, d.cap,
                                      d.scores.p, d.stride), M3IDX_OK);
  ck_assert_int_eq(m3idx_synchronize(g), M3IDX_ERR_DEVICE_INPUT);
  ck_assert_ptr_nonnull(strstr(m3idx_last_error(g), "work-map"));
  /* Still usable afterwards. */
  ck_assert_int_eq(fused_on_device(g, tc, &d), M3IDX_OK);
  ck_assert_int_eq(m3idx_synchronize(g), M3IDX_ERR_DEVICE_INPUT); /* the bad page id is still there */
  release(&d);
  m3idx_context_destroy(g);
  case_free(tc);
}
END_TEST

START_TEST(backend_reports) {
  ck_assert_ptr_null(m3idx_backend_unavailable_reason(M3IDX_BACKEND_HIP));
  m3idx_options o;
  m3idx_context *ctx;
  m3idx_options_init(&o);
  ck_assert_int_eq(m3idx_context_create(&o, &ctx), M3IDX_OK);
  ck_assert_int_eq(m3idx_context_backend(ctx), M3IDX_BACKEND_HIP); /* AUTO prefers the GPU */
  m3idx_context_destroy(ctx);
  o.device = 4096;
  o.backend = M3IDX_BACKEND_HIP;
  ck_assert_int_eq(m3idx_context_create(&o, &ctx), M3IDX_ERR_BACKEND_UNAVAILABLE);
  ck_assert_ptr_nonnull(strstr(m3idx_last_error(NULL), "device 4096"));
  char name[256];
  ck_assert_int_eq(dt->device_name(name, sizeof name), 0);
  printf("check-gpu: device %s\n", name);
}
END_TEST

/* A runtime call that fails (here hipSetDevice, made to take a device
 * ordinal that does not exist) gives M3IDX_ERR_DEVICE with the runtime's
 * message and leaves the outputs; once it works again, the next calls
 * succeed: the sticky error the failure left is not taken for theirs. */
START_TEST(device_call_failure) {
  static const int32_t lens[] = {3000, 129};
  struct test_case *tc = case_decode(16001u, FLAVOR_PLAIN, 2, 1, M3IDX_DTYPE_BF16, 2, lens);
  char why[512];
  struct case_results want;
  m3idx_context *c = make_ctx(tc, M3IDX_BACKEND_CPU, 0, NULL);
  ck_assert_msg(results_from_library(c, tc, &want, why, sizeof why) == 0, "cpu: %s", why);
  m3idx_context_destroy(c);
  m3idx_options o;
  case_options(tc, &o);
  o.backend = M3IDX_BACKEND_HIP;
  m3idx_context *g = NULL;
  ck_assert_int_eq(m3idx_context_create(&o, &g), M3IDX_OK);
  size_t n = (size_t)tc->batch.num_heads * tc->batch.num_rows * M3IDX_TOPK;
  int32_t *topk = malloc(n * sizeof *topk);
  memset(topk, 0x5a, n * sizeof *topk);
  ck_assert_int_eq(dt->inject_device_failure(1), 0);
  m3idx_status st = m3idx_index_topk_decode(g, &tc->batch, &tc->query, &tc->kcache,
                                            tc->init_blocks, tc->local_blocks, NULL, 0, topk,
                                            NULL, 0);
  m3idx_status sync = m3idx_synchronize(g);
  m3idx_context *g2 = NULL;
  m3idx_status create = m3idx_context_create(&o, &g2);
  char create_msg[512];
  snprintf(create_msg, sizeof create_msg, "%s", m3idx_last_error(NULL));
  ck_assert_int_eq(dt->inject_device_failure(0), 0);
  ck_assert_msg(st == M3IDX_ERR_DEVICE, "call: status %d, %s", st, m3idx_last_error(g));
  ck_assert_msg(strstr(m3idx_last_error(g), "hipSetDevice") != NULL, "%s", m3idx_last_error(g));
  ck_assert_int_eq(sync, M3IDX_ERR_DEVICE);
  ck_assert_msg(create == M3IDX_ERR_DEVICE && g2 == NULL, "create: %d, %s", create, create_msg);
  for (size_t i = 0; i < n; i++)
    ck_assert_int_eq(topk[i], 0x5a5a5a5a);
  /* Working again: every call succeeds, with the CPU's bytes. */
  struct case_results got;
  ck_assert_msg(results_from_library(g, tc, &got, why, sizeof why) == 0, "after: %s", why);
  ck_assert_msg(results_compare(tc, &got, &want, why, sizeof why) == 0, "after: %s", why);
  results_free(&got);
  results_free(&want);
  free(topk);
  m3idx_context_destroy(g);
  case_free(tc);
}
END_TEST

/* The self-check at context creation (lib-gpu/path-check.hip).  With the
 * fast path broken (every code byte's nibbles swapped, as a wrong nibble
 * order would read them), a new context finds that it differs from the
 * plain path, says why, and runs the plain path, so its results are still
 * the CPU's bytes; M3IDX_HIP_PATH=fast then refuses to create one.  Mended,
 * the next context runs the fast path again. */
START_TEST(fast_path_guard) {
  char why[512];
  unsetenv("M3IDX_HIP_PATH"); /* the guard is what auto does */
  static const int32_t lens[] = {3000, 129};
  struct test_case *tc = case_decode(16002u, FLAVOR_PLAIN, 2, 1, M3IDX_DTYPE_BF16, 2, lens);
  m3idx_context *g = make_ctx(tc, M3IDX_BACKEND_HIP, 0, NULL);
  m3idx_context_destroy(g);
  int path = dt->scoring_path(0, why, sizeof why);
  if (strstr(why, "has no fast path") != NULL) {
    ck_assert_int_eq(path, 0);
    printf("check-gpu: %s: nothing for the guard to check\n", why);
    case_free(tc);
    return;
  }
  ck_assert_msg(path == 1, "a healthy fast path was not taken: %d, %s", path, why);
  printf("check-gpu: %s\n", why);

  ck_assert_int_eq(dt->inject_broken_fast_path(1), 0);
  ck_assert_int_eq(dt->scoring_path(0, why, sizeof why), -1); /* forgotten */
  for (int i = 0; i < 6; i++)
    patterns_run(i, 0, hip_vs_cpu, NULL); /* each makes a context, after the check */
  path = dt->scoring_path(0, why, sizeof why);
  ck_assert_msg(path == 0 && strstr(why, "differs from the plain path") != NULL,
                "the broken fast path was not caught: %d, %s", path, why);
  setenv("M3IDX_HIP_PATH", "fast", 1);
  m3idx_options o;
  case_options(tc, &o);
  o.backend = M3IDX_BACKEND_HIP;
  g = NULL;
  ck_assert_int_eq(m3idx_context_create(&o, &g), M3IDX_ERR_BACKEND_UNAVAILABLE);
  ck_assert_ptr_null(g);
  ck_assert_msg(strstr(m3idx_last_error(NULL), "M3IDX_HIP_PATH is fast") != NULL, "%s",
                m3idx_last_error(NULL));
  unsetenv("M3IDX_HIP_PATH");

  ck_assert_int_eq(dt->inject_broken_fast_path(0), 0);
  g = make_ctx(tc, M3IDX_BACKEND_HIP, 0, NULL);
  m3idx_context_destroy(g);
  ck_assert_int_eq(dt->scoring_path(0, why, sizeof why), 1);
  case_free(tc);
}
END_TEST

/* Every row of the pick table, named by M3IDX_HIP_PATH (with the plain
 * row beside it for the shapes it does not take), gives the CPU's bytes
 * on every pattern; a row this device cannot run refuses the context and
 * says so. */
START_TEST(every_kernel_by_name) {
  const char *name = dt->scoring_kernel(_i);
  if (name == NULL)
    return; /* the table has fewer rows than the loop */
  setenv("M3IDX_HIP_PATH", name, 1);
  m3idx_options o;
  m3idx_context *g = NULL;
  m3idx_options_init(&o);
  o.backend = M3IDX_BACKEND_HIP;
  const m3idx_status rc = m3idx_context_create(&o, &g);
  m3idx_context_destroy(g);
  if (rc == M3IDX_ERR_BACKEND_UNAVAILABLE &&
      strstr(m3idx_last_error(NULL), "cannot run it") != NULL) {
    printf("check-gpu: kernel %s: %s\n", name, m3idx_last_error(NULL));
  } else {
    ck_assert_msg(rc == M3IDX_OK, "M3IDX_HIP_PATH=%s: %s", name, m3idx_last_error(NULL));
    for (int i = 0; i < patterns_total(); i++)
      patterns_run(i, 0, hip_vs_cpu, NULL);
    printf("check-gpu: kernel %s: every pattern gives the CPU's bytes\n", name);
  }
  unsetenv("M3IDX_HIP_PATH");
}
END_TEST

/* M3IDX_HIP_PATH takes plain, fast, auto or a kernel's name; anything else fails creation
 * with a message that names it. */
START_TEST(hip_path_variable) {
  m3idx_options o;
  m3idx_context *g = NULL;
  m3idx_options_init(&o);
  o.backend = M3IDX_BACKEND_HIP;
  setenv("M3IDX_HIP_PATH", "fastest", 1);
  ck_assert_int_eq(m3idx_context_create(&o, &g), M3IDX_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(g);
  ck_assert_msg(strstr(m3idx_last_error(NULL), "M3IDX_HIP_PATH is 'fastest'") != NULL, "%s",
                m3idx_last_error(NULL));
  setenv("M3IDX_HIP_PATH", "plain", 1);
  ck_assert_int_eq(m3idx_context_create(&o, &g), M3IDX_OK);
  m3idx_context_destroy(g);
  unsetenv("M3IDX_HIP_PATH");
}
END_TEST

int main(void) {
  const char *why = m3idx_backend_unavailable_reason(M3IDX_BACKEND_HIP);
  if (why != NULL) {
    printf("SKIP: the HIP backend is unavailable: %s\n", why);
    return 77;
  }
  dt = m3idx__plugin_devtools(&why);
  if (dt == NULL) {
    printf("FAIL: the HIP backend is available, but not its developer tools: %s\n", why);
    return 1;
  }
  Suite *s = suite_create("gpu");
  TCase *t = tcase_create("hip vs cpu");
  tcase_set_timeout(t, 1200);
  tcase_add_test(t, backend_reports);
  tcase_add_loop_test(t, pattern_hip_vs_cpu, 0, patterns_total());
  tcase_add_loop_test(t, device_pointers, 0, 2);
  tcase_add_test(t, graph_replay);
  tcase_add_test(t, verify_same_verdicts);
  tcase_add_test(t, device_bad_input);
  tcase_add_test(t, device_call_failure);
  tcase_add_test(t, fast_path_guard);
  tcase_add_test(t, hip_path_variable);
  tcase_add_loop_test(t, every_kernel_by_name, 0, 8);
  suite_add_tcase(s, t);
  TCase *k = tcase_create("top-k"); /* CK_RUN_CASE=top-k runs it alone */
  tcase_set_timeout(k, 600);
  tcase_add_loop_test(k, topk_row_lengths, 0, 2);
  suite_add_tcase(s, k);
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_NOFORK); /* HIP breaks in a forked child */
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
