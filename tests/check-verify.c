/*
 * check-verify.c - m3idx_verify_topk (SPEC section 13).  No false alarm:
 * candidates computed here in fp32 in many summation orders, in fp64, in
 * the blocked order of a tensor core and from e4m3-rounded queries (with
 * that option) are never wrong, and those that differ from m3idx are
 * equivalent.  No missed bug: mutants of an exact candidate (a duplicate,
 * 15 ids, a non-causal id, a forced block missing, the order reversed, a
 * dropped element group, another head's scores, a causal position off by
 * one, the next token's scale bytes, a score outside its bound)
 * are wrong, with their reason, on every row they change.  Scores one
 * ulp off m3idx's (near ties at the cut) are never wrong.
 *
 * SPDX-License-Identifier: MIT
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "suite-main.h"
#include "verify-row.h"

/* How a candidate sums a key's 128 fp32 products. */
enum order { NATURAL, REVERSED, PAIRWISE, SHUFFLED, BLOCKED, FP64, DROP_GROUP, ORDERS };

static float sum_products(const float *t, enum order o, uint64_t *rs) {
  float s = 0.0f;
  switch (o) {
  case NATURAL:
    for (int d = 0; d < 128; d++)
      s += t[d];
    return s;
  case REVERSED:
    for (int d = 127; d >= 0; d--)
      s += t[d];
    return s;
  case PAIRWISE: {
    float w[128];
    memcpy(w, t, sizeof w);
    for (int n = 128; n > 1; n /= 2)
      for (int i = 0; i < n / 2; i++)
        w[i] = w[2 * i] + w[2 * i + 1];
    return w[0];
  }
  case SHUFFLED: {
    int idx[128];
    for (int d = 0; d < 128; d++)
      idx[d] = d;
    for (int d = 127; d > 0; d--) {
      int j = (int)(case_rand(rs) % (uint64_t)(d + 1)), x = idx[d];
      idx[d] = idx[j];
      idx[j] = x;
    }
    for (int d = 0; d < 128; d++)
      s += t[idx[d]];
    return s;
  }
  case BLOCKED: { /* chunks of 16 (an MMA's k), each summed, then accumulated */
    for (int c = 0; c < 8; c++) {
      float p = 0.0f;
      for (int d = 16 * c; d < 16 * c + 16; d++)
        p += t[d];
      s += p;
    }
    return s;
  }
  case FP64: {
    double a = 0.0;
    for (int d = 0; d < 128; d++)
      a += t[d];
    return (float)a;
  }
  case DROP_GROUP: /* a bug: the last element group left out */
    for (int d = 0; d < 96; d++)
      s += t[d];
    return s;
  default:
    return NAN;
  }
}

/* e4m3 of x, round to nearest even, saturating at 448 (written out here). */
static float to_e4m3(float x) {
  float a = fabsf(x);
  if (a >= 448.0f)
    return copysignf(448.0f, x);
  int e;
  frexpf(a, &e);                         /* a in [2^(e-1), 2^e) */
  int step = e - 1 < -6 ? -9 : e - 4;    /* 3 mantissa bits; subnormals 2^-9 apart */
  return copysignf(ldexpf(rintf(ldexpf(a, -step)), step), x);
}

/* A candidate's clamped, unpinned scores [H, rows, width]: fp32 products of
 * the (perhaps e4m3-rounded) query and the keys, summed in order o, times
 * the scale in fp32; the largest over each block's causal keys. */
/* Bugs a candidate may have, besides its order: keys 0 .. pos + 1 (a
 * causal off-by-one), each group's scale byte read from the next token. */
enum bug { NO_BUG, CAUSAL_PLUS_ONE, NEIGHBOUR_SCALE };

static void candidate_scores(const struct test_case *tc, enum order o, int e4m3_query,
                             int head_shift, enum bug bug, float *out, int64_t width) {
  const struct oracle_call *c = &tc->oc;
  uint64_t rs = tc->seed * 31 + (uint64_t)o;
  for (int h = 0; h < c->num_heads; h++)
    for (int row = 0; row < c->num_rows; row++) {
      const int qh = (h + head_shift) % c->num_heads;
      float q[128], sigma = 1.0f, amax = 0.0f;
      for (int d = 0; d < 128; d++) {
        size_t i = ((size_t)row * c->num_heads + qh) * 128 + d;
        q[d] = c->dtype == 1 ? oracle_bf16(((const uint16_t *)c->query)[i])
                             : oracle_e4m3(((const uint8_t *)c->query)[i]);
        amax = fabsf(q[d]) > amax ? fabsf(q[d]) : amax;
      }
      if (e4m3_query && amax > 0.0f) {
        sigma = amax / 448.0f;
        for (int d = 0; d < 128; d++)
          q[d] = to_e4m3(q[d] / sigma);
      }
      int r = 0;
      if (c->mode == 1)
        r = row / c->query_len;
      else
        while (c->cu_seqlens_q[r + 1] <= row)
          r++;
      const int pos = oracle_row_pos(c, row) + (bug == CAUSAL_PLUS_ONE);
      float *dst = out + ((int64_t)h * c->num_rows + row) * width;
      for (int b = 0; b * 128 <= pos; b++) {
        float best = NAN;
        const int page = c->block_table[(size_t)r * c->bt_stride + b];
        const uint8_t *pg = c->pages + (size_t)page * 8704;
        for (int p = b * 128; p <= pos && p < b * 128 + 128; p++) {
          float t[128];
          const int slot = p % 128;
          for (int d = 0; d < 128; d++) {
            const uint8_t byte = pg[64 * slot + d / 2];
            const int sslot = bug == NEIGHBOUR_SCALE ? (slot + 1) % 128 : slot;
            const float k = oracle_e2m1(d % 2 ? byte >> 4 : byte & 15u) *
                            oracle_e8m0(pg[8192 + 4 * sslot + d / 32]);
            t[d] = q[d] * k;
          }
          float l = sum_products(t, o, &rs) * sigma * c->scale;
          if (l == l && !(l <= best))
            best = l;
        }
        const float cap = nextafterf(1e29f, 0.0f);
        dst[b] = best > cap ? cap : best;
      }
    }
}

struct run {
  struct test_case *tc;
  m3idx_context *ctx;
  int64_t width;
  float *scores;  /* the candidate's, unpinned */
  float *pinned;
  int32_t *ids;
  m3idx_verify_row *rows;
  m3idx_verify_summary sum;
};

static void run_open(struct run *x, struct test_case *tc) {
  memset(x, 0, sizeof *x);
  x->tc = tc;
  m3idx_options o;
  case_options(tc, &o);
  o.backend = M3IDX_BACKEND_CPU;
  ck_assert_int_eq(m3idx_context_create(&o, &x->ctx), M3IDX_OK);
  x->width = oracle_width(&tc->oc);
  size_t n = (size_t)tc->batch.num_heads * (size_t)tc->batch.num_rows;
  x->scores = calloc(n * (size_t)x->width, sizeof(float));
  x->pinned = calloc(n * (size_t)x->width, sizeof(float));
  x->ids = calloc(n * 16, sizeof(int32_t));
  x->rows = calloc(n, sizeof *x->rows);
}

static void run_close(struct run *x) {
  m3idx_context_destroy(x->ctx);
  free(x->scores);
  free(x->pinned);
  free(x->ids);
  free(x->rows);
  case_free(x->tc);
}

/* The candidate's ids from its scores: pinned, then the oracle's top-k. */
static void ids_of_scores(struct run *x) {
  size_t n = (size_t)x->tc->batch.num_heads * (size_t)x->tc->batch.num_rows * (size_t)x->width;
  memcpy(x->pinned, x->scores, n * sizeof(float));
  oracle_pin(&x->tc->oc, x->pinned, x->width);
  oracle_topk(&x->tc->oc, x->pinned, x->width, x->ids);
}

static m3idx_status verify(struct run *x, int with_scores, const m3idx_verify_options *o) {
  const struct test_case *tc = x->tc;
  return m3idx_verify_topk(x->ctx, &tc->batch, &tc->query, &tc->kcache, tc->init_blocks,
                           tc->local_blocks, x->ids, with_scores ? x->scores : NULL, x->width,
                           o, x->rows, &x->sum);
}

static struct test_case *make_case(int i, int flavor, m3idx_dtype dtype) {
  static const int32_t lens[] = {2500, 129, 700, 4000};
  static const int32_t ctx[] = {0, 1500, 300}, q[] = {40, 30, 9};
  struct test_case *tc = i % 2 ? case_prefill(8100u + (uint64_t)i, flavor, 2, dtype, 3, ctx, q)
                               : case_decode(8100u + (uint64_t)i, flavor, 2, 2, dtype, 4, lens);
  case_set_forced(tc, i % 3 == 0 ? 1 : 0, i % 4 == 3 ? 0 : 1);
  return tc;
}

/* The exact candidate (m3idx's own ids and scores). */
static void exact_candidate(struct run *x) {
  const struct test_case *tc = x->tc;
  if (tc->batch.mode == M3IDX_MODE_DECODE)
    ck_assert_int_eq(m3idx_score_decode(x->ctx, &tc->batch, &tc->query, &tc->kcache, NULL, 0,
                                        x->scores, x->width), M3IDX_OK);
  else
    ck_assert_int_eq(m3idx_score_prefill(x->ctx, &tc->batch, &tc->query, &tc->kcache,
                                         x->scores, x->width), M3IDX_OK);
  ids_of_scores(x);
}

/* Every block of each request read from one page: equal exact scores,
 * which a candidate's own roundings order as they fall. */
static void one_page_a_request(struct test_case *tc) {
  for (int r = 0; r < tc->batch.num_reqs; r++) {
    int32_t *row = tc->block_table + (int64_t)r * tc->kcache.bt_stride;
    for (int b = 1; b * 128 < tc->seq_lens[r]; b++)
      row[b] = row[0];
  }
}

static int row_blocks(const struct run *x, int64_t hr) {
  return oracle_row_blocks(&x->tc->oc, (int)(hr % x->tc->batch.num_rows));
}
/* ---- every block's terms: the definition the library evaluates lazily ---- */

/* Row hr's block b interval from every term (the rule's own functions),
 * the straightforward full scan of SPEC section 13 over it. */
struct iv {
  double lo, hi, x, e;
};

static struct iv full_interval(const struct run *x, int64_t hr, int32_t b, int n,
                               const m3idx_verify_options *o, const float *ref, double *terms) {
  const struct test_case *tc = x->tc;
  const int row = (int)(hr % tc->batch.num_rows), h = (int)(hr / tc->batch.num_rows);
  const int r = tc->batch.mode == M3IDX_MODE_DECODE ? row / tc->batch.query_len : 0;
  int req = r;
  if (tc->batch.mode == M3IDX_MODE_PREFILL)
    while (tc->batch.cu_seqlens_q[req + 1] <= row)
      req++;
  const float xr = ref[b];
  struct iv v = {0, 0, xr, 0};
  const int forced = b < tc->init_blocks || b >= n - tc->local_blocks;
  if (xr != xr) {
    v.lo = v.hi = v.x = -INFINITY;
    return v;
  }
  if (forced || xr == -INFINITY) {
    v.lo = v.hi = v.x = xr == -INFINITY ? -DBL_MAX : (double)xr;
    return v;
  }
  float q[128];
  double amax = 0.0;
  for (int d = 0; d < 128; d++) {
    const int64_t i = ((int64_t)row * tc->batch.num_heads + h) * 128 + d;
    q[d] = tc->query.dtype == M3IDX_DTYPE_BF16 ? oracle_bf16(((const uint16_t *)tc->query.data)[i])
                                               : oracle_e4m3(((const uint8_t *)tc->query.data)[i]);
    amax = fabs((double)q[d]) > amax || q[d] != q[d] ? fabs((double)q[d]) : amax;
  }
  uint32_t qi[128];
  const int32_t sh = m3idx__verify_row_ints(q, qi);
  const int pos = oracle_row_pos(&tc->oc, row);
  const int keys = pos - 128 * b + 1 < 128 ? pos - 128 * b + 1 : 128;
  const uint8_t *page = tc->kcache.pages +
                        (int64_t)tc->block_table[(int64_t)req * tc->kcache.bt_stride + b] * M3IDX_PAGE_BYTES;
  m3idx__verify_block_terms(qi, sh, page, page + M3IDX_PAGE_DATA_BYTES, keys, terms);
  /* The terms are never below the truth: each key's sum |q k| in fp64
     (exact for these cases, whose products span few binades). */
  for (int t = 0; t < keys; t++) {
    if (m3idx__key_spread(page + 8192 + 4 * t) == 255)
      continue;
    double a = 0.0;
    for (int d = 0; d < 128; d++) {
      const uint8_t byte = page[64 * t + d / 2];
      a += fabs((double)q[d]) * fabs((double)oracle_e2m1(d % 2 ? byte >> 4 : byte & 15u)) *
           (double)oracle_e8m0(page[8192 + 4 * t + d / 32]);
    }
    ck_assert_msg(a <= terms[0], "block %d key %d: sum |q k| %a above the term %a", b, t, a,
                  terms[0]);
  }
  const double e = m3idx__verify_bound(terms[0], terms[1], amax, tc->query.scale,
                                       o->query_rounding, xr, o->tolerance_rel,
                                       o->tolerance_ulps);
  v.e = (m3idx__verify_half_ulp(xr) + e) * (1.0 + 0x1p-20);
  v.lo = (double)xr - v.e;
  v.hi = (double)xr + v.e < 0x1.43e1eep+96 ? (double)xr + v.e : 0x1.43e1eep+96;
  return v;
}

/* The verdicts with every block's terms, set, order and scores as SPEC
 * section 13 states them; rows the structure rejects are left out. */
static void every_term_matches(struct run *x, int with_scores, const m3idx_verify_options *o) {
  const struct test_case *tc = x->tc;
  const int64_t pairs = (int64_t)tc->batch.num_heads * tc->batch.num_rows, w = x->width;
  m3idx_verify_options dflt;
  m3idx_verify_options_init(&dflt);
  o = o ? o : &dflt;
  float *ref = calloc((size_t)(pairs * w), sizeof(float));
  int32_t *ref_ids = calloc((size_t)(pairs * 16), sizeof(int32_t));
  struct iv *ivs = calloc((size_t)w, sizeof *ivs);
  ck_assert_int_eq(tc->batch.mode == M3IDX_MODE_DECODE
                       ? m3idx_index_topk_decode(x->ctx, &tc->batch, &tc->query, &tc->kcache,
                                                 tc->init_blocks, tc->local_blocks, NULL, 0,
                                                 ref_ids, ref, w)
                       : m3idx_index_topk_prefill(x->ctx, &tc->batch, &tc->query, &tc->kcache,
                                                  tc->init_blocks, tc->local_blocks, ref_ids,
                                                  ref, w),
                   M3IDX_OK);
  double max_dev = 0.0;
  for (int64_t hr = 0; hr < pairs; hr++) {
    const int n = row_blocks(x, hr), count = n < 16 ? n : 16;
    double t[2];
    for (int b = 0; b < n; b++)
      ivs[b] = full_interval(x, hr, b, n, o, ref + hr * w, t);
    const int32_t *ids = x->ids + hr * 16;
    const m3idx_verify_row *got = &x->rows[hr];
    int bad = -1;
    double bad_dev = 0.0;
    for (int b = 0; with_scores && b < n; b++) {
      if (b < tc->init_blocks || b >= n - tc->local_blocks)
        continue;
      double s = x->scores[hr * w + b];
      s = s != s ? -INFINITY : s == -INFINITY ? -DBL_MAX : s > 0x1.43e1eep+96 ? 0x1.43e1eep+96 : s;
      const double dev = s == ivs[b].x ? 0.0 : ivs[b].e > 0 ? fabs(s - ivs[b].x) / ivs[b].e : INFINITY;
      max_dev = dev > max_dev ? dev : max_dev;
      if ((s < ivs[b].lo || s > ivs[b].hi) && bad < 0) {
        bad = b;
        bad_dev = dev;
      }
    }
    if (got->reason >= M3IDX_REASON_ID_RANGE && got->reason <= M3IDX_REASON_FORCED)
      continue;
    int reason = 0, a = -1, bb = -1;
    float gap = 0.0f;
    if (memcmp(ids, ref_ids + hr * 16, 64) != 0) {
      for (int j = 0; j < count; j++)
        if (a < 0 || ivs[ids[j]].hi < ivs[a].hi)
          a = ids[j];
      for (int k = 0; k < n; k++) {
        int taken = 0;
        for (int j = 0; j < count; j++)
          taken |= ids[j] == k;
        if (!taken && (bb < 0 || ivs[k].lo > ivs[bb].lo))
          bb = k;
      }
      if (bb >= 0 && ivs[bb].lo > ivs[a].hi) {
        reason = M3IDX_REASON_SET;
        gap = (float)((ivs[bb].x - ivs[a].x) / (ivs[a].e + ivs[bb].e));
      } else if (o->order == M3IDX_ORDER_DESC) {
        for (int j = 0; j + 1 < count && !reason; j++)
          if (ivs[ids[j + 1]].lo > ivs[ids[j]].hi) {
            reason = M3IDX_REASON_ORDER;
            a = ids[j];
            bb = ids[j + 1];
            gap = (float)((ivs[bb].x - ivs[a].x) / (ivs[a].e + ivs[bb].e));
          }
      }
    }
    if (!reason && bad >= 0) {
      reason = M3IDX_REASON_SCORE;
      a = bad;
      gap = (float)bad_dev;
    }
    ck_assert_msg(got->reason == reason, "row %lld: reason %d, every term gives %d",
                  (long long)hr, got->reason, reason);
    if (reason == M3IDX_REASON_SET || reason == M3IDX_REASON_ORDER)
      ck_assert_msg(got->block_a == a && got->block_b == bb && got->gap == gap,
                    "row %lld: blocks %d %d gap %a, every term gives %d %d %a", (long long)hr,
                    got->block_a, got->block_b, (double)got->gap, a, bb, (double)gap);
    if (reason == M3IDX_REASON_SCORE)
      ck_assert(got->block_a == a && got->gap == gap);
  }
  if (with_scores)
    ck_assert_msg(x->sum.max_score_deviation == max_dev, "largest deviation %a, every term %a",
                  x->sum.max_score_deviation, max_dev);
  free(ref);
  free(ref_ids);
  free(ivs);
}

/* Every honest candidate: never wrong; not all exact across the orders. */
START_TEST(no_false_alarm) {
  int64_t exact = 0, equivalent = 0;
  for (int i = 0; i < 8; i++) {
    struct run x;
    run_open(&x, make_case(i, i % 3 == 2 ? FLAVOR_TIES : FLAVOR_PLAIN,
                           i % 2 ? M3IDX_DTYPE_E4M3 : M3IDX_DTYPE_BF16));
    if (i >= 6)
      one_page_a_request(x.tc);
    for (int o = NATURAL; o <= FP64; o++) {
      candidate_scores(x.tc, (enum order)o, 0, 0, NO_BUG, x.scores, x.width);
      ids_of_scores(&x);
      ck_assert_int_eq(verify(&x, 1, NULL), M3IDX_OK);
      every_term_matches(&x, 1, NULL);
      for (int64_t r = 0; r < x.sum.rows; r++)
        ck_assert_msg(x.rows[r].verdict != M3IDX_VERDICT_WRONG,
                      "case %d order %d row %lld: reason %d blocks %d %d gap %g", i, o,
                      (long long)r, x.rows[r].reason, x.rows[r].block_a, x.rows[r].block_b,
                      (double)x.rows[r].gap);
      ck_assert_int_eq(x.sum.exact + x.sum.equivalent, x.sum.rows);
      ck_assert(x.sum.max_score_deviation <= 1.0);
      printf("case %d order %d: %lld exact, %lld equivalent, largest deviation %.3g of the bound\n",
             i, o, (long long)x.sum.exact, (long long)x.sum.equivalent, x.sum.max_score_deviation);
      exact += x.sum.exact;
      equivalent += x.sum.equivalent;
    }
    run_close(&x);
  }
  ck_assert_int_gt(exact, 0);
  ck_assert_msg(equivalent > 0, "no candidate differed from m3idx: the test cannot tell");
}
END_TEST

/* Near ties at the cut: m3idx's own scores, each moved one fp32 ulp up or
 * down at random (any fp32 method may land there), on data where whole
 * requests read one page (exact ties everywhere), and on special values
 * (rows holding inf or NaN bound nothing): never wrong, and many rows
 * pick other blocks than m3idx (equivalent). */
START_TEST(one_ulp_near_ties) {
  int64_t equivalent = 0;
  for (int i = 0; i < 6; i++) {
    struct run x;
    run_open(&x, make_case(i, i < 4 ? FLAVOR_PLAIN : FLAVOR_SPECIAL,
                           i % 2 ? M3IDX_DTYPE_E4M3 : M3IDX_DTYPE_BF16));
    one_page_a_request(x.tc);
    exact_candidate(&x);
    uint64_t rs = 77u + (uint64_t)i;
    size_t n = (size_t)x.tc->batch.num_heads * (size_t)x.tc->batch.num_rows * (size_t)x.width;
    for (size_t k = 0; k < n; k++)
      if (x.scores[k] == x.scores[k] && fabsf(x.scores[k]) < 1e29f)
        x.scores[k] = nextafterf(x.scores[k], case_rand(&rs) & 1 ? INFINITY : -INFINITY);
    ids_of_scores(&x);
    ck_assert_int_eq(verify(&x, 1, NULL), M3IDX_OK);
    ck_assert_msg(x.sum.wrong == 0, "case %d: %lld wrong", i, (long long)x.sum.wrong);
    ck_assert(x.sum.max_score_deviation <= 1.0);
    printf("1-ulp case %d: %lld exact, %lld equivalent\n", i, (long long)x.sum.exact,
           (long long)x.sum.equivalent);
    equivalent += x.sum.equivalent;
    run_close(&x);
  }
  ck_assert_int_gt(equivalent, 0);
}
END_TEST

/* A query rounded to e4m3 first (per-row scale amax / 448) is explained
 * with that option, and flagged without it on rows it changes. */
START_TEST(e4m3_rounded_query) {
  m3idx_verify_options o;
  m3idx_verify_options_init(&o);
  o.query_rounding = M3IDX_QUERY_ROUNDING_E4M3;
  int64_t wrong_without = 0;
  for (int i = 0; i < 4; i++) {
    struct run x;
    run_open(&x, make_case(i, FLAVOR_PLAIN, M3IDX_DTYPE_BF16));
    candidate_scores(x.tc, NATURAL, 1, 0, NO_BUG, x.scores, x.width);
    ids_of_scores(&x);
    ck_assert_int_eq(verify(&x, 1, &o), M3IDX_OK);
    ck_assert_msg(x.sum.wrong == 0, "case %d: %lld wrong with the e4m3 model", i,
                  (long long)x.sum.wrong);
    ck_assert_int_eq(verify(&x, 1, NULL), M3IDX_OK);
    wrong_without += x.sum.wrong;
    run_close(&x);
  }
  ck_assert_int_gt(wrong_without, 0); /* the model is what explains them */
}
END_TEST


/* Apply a mutation to every row it can change; each must be wrong with
 * the reason, and the other rows exact. */
typedef int (*mutation)(struct run *x, int64_t hr, int32_t *ids, float *scores);

static int m_duplicate(struct run *x, int64_t hr, int32_t *ids, float *s) {
  if (row_blocks(x, hr) < 2)
    return 0;
  ids[1] = ids[0];
  return 1;
}
static int m_fifteen(struct run *x, int64_t hr, int32_t *ids, float *s) {
  if (row_blocks(x, hr) < 16)
    return 0;
  ids[15] = -1;
  return 1;
}
static int m_not_causal(struct run *x, int64_t hr, int32_t *ids, float *s) {
  ids[0] = row_blocks(x, hr); /* the first block past the row's position */
  return 1;
}
static int m_padding(struct run *x, int64_t hr, int32_t *ids, float *s) {
  int n = row_blocks(x, hr);
  if (n >= 16)
    return 0;
  ids[15] = 0;
  return 1;
}
static int m_forced(struct run *x, int64_t hr, int32_t *ids, float *s) {
  /* The local block (n - 1, pinned first unless an init block is) gone:
     its slot takes a block not in the set. */
  int n = row_blocks(x, hr);
  if (n <= 16 || x->tc->local_blocks == 0)
    return 0;
  for (int j = 0; j < 16; j++)
    if (ids[j] == n - 1) {
      for (int b = 0; b < n; b++) {
        int in = 0;
        for (int i = 0; i < 16; i++)
          in |= ids[i] == b;
        if (!in) {
          ids[j] = b;
          return 1;
        }
      }
    }
  return 0;
}
static int m_reversed(struct run *x, int64_t hr, int32_t *ids, float *s) {
  int n = row_blocks(x, hr), count = n < 16 ? n : 16;
  int forced = x->tc->init_blocks + x->tc->local_blocks; /* they lead */
  if (count - forced < 2)
    return 0;
  /* Reversed after the forced blocks, where the first and last of them
     are far apart (a real order bug, not a near tie). */
  const float *pin = x->pinned + hr * x->width;
  if (!(pin[ids[count - 1]] < pin[ids[forced]] * 0.99f - 1e-3f))
    return 0;
  for (int i = forced, j = count - 1; i < j; i++, j--) {
    int32_t t = ids[i];
    ids[i] = ids[j];
    ids[j] = t;
  }
  return 1;
}


static void check_mutation(mutation m, int want_reason, const char *name) {
  for (int i = 0; i < 4; i++) {
    struct run x;
    run_open(&x, make_case(i, FLAVOR_PLAIN, M3IDX_DTYPE_BF16));
    exact_candidate(&x);
    ck_assert_int_eq(verify(&x, 1, NULL), M3IDX_OK);
    ck_assert_int_eq(x.sum.exact, x.sum.rows);
    int64_t rows = x.sum.rows, changed = 0;
    char *mutated = calloc((size_t)rows, 1);
    for (int64_t hr = 0; hr < rows; hr++) {
      mutated[hr] = (char)m(&x, hr, x.ids + hr * 16, x.scores + hr * x.width);
      changed += mutated[hr];
    }
    ck_assert_int_eq(verify(&x, 0, NULL), M3IDX_OK);
    every_term_matches(&x, 0, NULL);
    for (int64_t hr = 0; hr < rows; hr++) {
      if (!mutated[hr]) {
        ck_assert_msg(x.rows[hr].verdict != M3IDX_VERDICT_WRONG, "%s, case %d row %lld (not mutated): reason %d slot %d block %d", name, i, (long long)hr, x.rows[hr].reason, x.rows[hr].slot, x.rows[hr].block_a);
        continue;
      }
      ck_assert_msg(x.rows[hr].verdict == M3IDX_VERDICT_WRONG && x.rows[hr].reason == want_reason,
                    "%s, case %d row %lld: verdict %d reason %d", name, i, (long long)hr,
                    x.rows[hr].verdict, x.rows[hr].reason);
    }
    ck_assert_int_eq(x.sum.wrong, changed);
    free(mutated);
    run_close(&x);
  }
}

START_TEST(structural_mutants) {
  check_mutation(m_duplicate, M3IDX_REASON_DUPLICATE, "duplicate");
  check_mutation(m_fifteen, M3IDX_REASON_COUNT, "15 ids");
  check_mutation(m_not_causal, M3IDX_REASON_ID_RANGE, "a block past n");
  check_mutation(m_padding, M3IDX_REASON_PADDING, "an id past the count");
  check_mutation(m_forced, M3IDX_REASON_FORCED, "a forced block missing");
  check_mutation(m_reversed, M3IDX_REASON_ORDER, "the order reversed");
}
END_TEST

/* Buggy scores: a dropped element group, another head's scores.  Each row
 * whose ids change is wrong (SET or ORDER); with the scores given, every
 * row whose scores leave their bounds is wrong. */
static void check_buggy_scores(enum order o, int head_shift, enum bug bug, const char *name) {
  int64_t flagged = 0;
  for (int i = 0; i < 4; i++) {
    struct run x;
    run_open(&x, make_case(i, FLAVOR_PLAIN, M3IDX_DTYPE_BF16));
    exact_candidate(&x);
    int64_t rows = (int64_t)x.tc->batch.num_heads * x.tc->batch.num_rows;
    int32_t *exact_ids = malloc(sizeof(int32_t) * 16 * (size_t)rows);
    memcpy(exact_ids, x.ids, sizeof(int32_t) * 16 * (size_t)rows);
    candidate_scores(x.tc, o, 0, head_shift, bug, x.scores, x.width);
    ids_of_scores(&x);
    ck_assert_int_eq(verify(&x, 0, NULL), M3IDX_OK);
    every_term_matches(&x, 0, NULL);
    for (int64_t hr = 0; hr < rows; hr++) {
      if (memcmp(exact_ids + 16 * hr, x.ids + 16 * hr, 64) == 0)
        continue;
      /* A changed row: wrong unless the change is a near tie the bound
         allows, which these bugs (a quarter of the products, or another
         row's scores) make rare; count, and require most. */
      flagged += x.rows[hr].verdict == M3IDX_VERDICT_WRONG;
    }
    ck_assert_int_eq(verify(&x, 1, NULL), M3IDX_OK);
    every_term_matches(&x, 1, NULL);
    /* An extra causal key lands in the row's last block, which pinning
       hides while it is a local block: only a call without local blocks
       shows it. */
    if (bug != CAUSAL_PLUS_ONE || x.tc->local_blocks == 0)
      ck_assert_msg(x.sum.wrong > 0 && x.sum.max_score_deviation > 1.0, "%s case %d", name, i);
    for (int64_t hr = 0; hr < rows; hr++)
      if (x.rows[hr].verdict == M3IDX_VERDICT_WRONG)
        ck_assert(x.rows[hr].reason == M3IDX_REASON_SET || x.rows[hr].reason == M3IDX_REASON_ORDER ||
                  x.rows[hr].reason == M3IDX_REASON_SCORE);
    free(exact_ids);
    run_close(&x);
  }
  ck_assert_msg(flagged > 0, "%s: no changed row was flagged", name);
}

START_TEST(buggy_scores) {
  check_buggy_scores(DROP_GROUP, 0, NO_BUG, "a dropped element group");
  check_buggy_scores(NATURAL, 1, NO_BUG, "another head's scores");
  check_buggy_scores(NATURAL, 0, CAUSAL_PLUS_ONE, "a causal position off by one");
  check_buggy_scores(NATURAL, 0, NEIGHBOUR_SCALE, "the next token's scale bytes");
}
END_TEST

/* A score moved just past its bound is flagged, just inside is not: the
 * bound is what decides. */
START_TEST(score_at_the_bound) {
  struct run x;
  run_open(&x, make_case(0, FLAVOR_PLAIN, M3IDX_DTYPE_BF16));
  exact_candidate(&x);
  /* Find the bound of block 1 of row 0 by bisection on its score. */
  const float s0 = x.scores[1];
  float lo = 0.0f, hi = fabsf(s0) + 1.0f;
  for (int it = 0; it < 60; it++) {
    float mid = 0.5f * (lo + hi);
    x.scores[1] = s0 + mid;
    ck_assert_int_eq(verify(&x, 1, NULL), M3IDX_OK);
    if (x.rows[0].verdict == M3IDX_VERDICT_WRONG)
      hi = mid;
    else
      lo = mid;
  }
  ck_assert(lo > 0.0f && hi < 1e-2f * (fabsf(s0) + 1.0f)); /* a real, narrow bound */
  x.scores[1] = s0 + hi * 1.01f;
  ck_assert_int_eq(verify(&x, 1, NULL), M3IDX_OK);
  ck_assert_int_eq(x.rows[0].reason, M3IDX_REASON_SCORE);
  ck_assert_int_eq(x.rows[0].block_a, 1);
  ck_assert(x.rows[0].gap > 1.0f && x.rows[0].gap < 1.1f);
  x.scores[1] = s0 + lo * 0.99f;
  ck_assert_int_eq(verify(&x, 1, NULL), M3IDX_OK);
  ck_assert_int_ne(x.rows[0].verdict, M3IDX_VERDICT_WRONG);
  run_close(&x);
}
END_TEST

/* x opened on case i with a candidate summed in another order (shuffled)
 * or with a dropped group (wrong rows), verified with its scores. */
static void open_verified(struct run *x, int i) {
  run_open(x, make_case(i, FLAVOR_PLAIN, M3IDX_DTYPE_BF16));
  candidate_scores(x->tc, i % 2 ? SHUFFLED : DROP_GROUP, 0, 0, NO_BUG, x->scores, x->width);
  ids_of_scores(x);
  ck_assert_int_eq(verify(x, 1, NULL), M3IDX_OK);
}

/* Candidate scores with a stride past the width (a row padded, as
 * vLLM's Triton indexer pads to 16 blocks): the same verdicts as
 * packed, every row read at its own offset. */
START_TEST(score_stride_past_the_width) {
  for (int i = 0; i < 4; i++) {
    struct run x;
    open_verified(&x, i);
    const int64_t pairs = x.sum.rows, stride = x.width + 5;
    m3idx_verify_row *packed = malloc(sizeof *packed * (size_t)pairs);
    memcpy(packed, x.rows, sizeof *packed * (size_t)pairs);
    const m3idx_verify_summary with = x.sum;
    float *padded = malloc(sizeof(float) * (size_t)(pairs * stride));
    for (int64_t hr = 0; hr < pairs; hr++)
      for (int64_t b = 0; b < stride; b++)
        padded[hr * stride + b] = b < x.width ? x.scores[hr * x.width + b] : -7.0f;
    const struct test_case *tc = x.tc;
    ck_assert_int_eq(m3idx_verify_topk(x.ctx, &tc->batch, &tc->query, &tc->kcache, tc->init_blocks,
                                       tc->local_blocks, x.ids, padded, stride, NULL, x.rows,
                                       &x.sum), M3IDX_OK);
    ck_assert_int_eq(memcmp(packed, x.rows, sizeof *packed * (size_t)pairs), 0);
    ck_assert(memcmp(&with, &x.sum, sizeof with) == 0);
    free(packed);
    free(padded);
    run_close(&x);
  }
}
END_TEST

/* Verdicts only (M3IDX_VERIFY_NO_MAX_DEVIATION): every row's verdict and
 * proof as with the largest deviation, which is NaN. */
START_TEST(verdicts_only) {
  m3idx_verify_options o;
  m3idx_verify_options_init(&o);
  o.flags = M3IDX_VERIFY_NO_MAX_DEVIATION;
  for (int i = 0; i < 4; i++) {
    struct run x;
    open_verified(&x, i);
    const size_t n = sizeof *x.rows * (size_t)x.sum.rows;
    m3idx_verify_row *all = malloc(n);
    memcpy(all, x.rows, n);
    const m3idx_verify_summary with = x.sum;
    ck_assert_int_eq(verify(&x, 1, &o), M3IDX_OK);
    ck_assert_int_eq(memcmp(all, x.rows, n), 0);
    ck_assert(x.sum.exact == with.exact && x.sum.equivalent == with.equivalent &&
              x.sum.wrong == with.wrong);
    ck_assert(isnan(x.sum.max_score_deviation) && with.max_score_deviation > 0.0);
    free(all);
    run_close(&x);
  }
}
END_TEST

/* The device's shortcut (m3idx__verify_near) never says "inside" of a
 * score that the interval from the block's a-floor leaves outside: random
 * references over the whole fp32 range, scores 0 to 160 ulps away, scales
 * from tiny to huge, rows with an inf or NaN element, every query
 * rounding and no tolerance.  It must also
 * take the scores it is for (within 64 ulps of an ordinary x). */
START_TEST(near_rule_is_inside) {
  uint64_t x = 0x2545f4914f6cdd1dull;
  long long near = 0;
  for (int i = 0; i < 400000; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const float ref = m3idx__bits_to_float((uint32_t)x & 0xff7fffffu); /* finite */
    const int32_t ulps = (int32_t)((x >> 32) % 161);
    float s = ref;
    for (int32_t k = 0; k < ulps; k++)
      s = nextafterf(s, (x >> 40) & 1 ? INFINITY : -INFINITY);
    const float scale = ldexpf(1.0f + (float)((x >> 44) & 0xff) / 256.0f,
                               (int)((x >> 52) % 300) - 150);
    m3idx_verify_options o;
    m3idx_verify_options_init(&o);
    o.query_rounding = (int)((x >> 20) % 3);
    const int special = (int)((x >> 28) % 16); /* a row holding an inf or a NaN */
    const double amax = special == 0 ? INFINITY : special == 1 ? NAN
                                                               : ldexp(1.0, (int)((x >> 8) % 200) - 100);
    const struct m3idx_verify_interval f = m3idx__verify_score_floor(ref, 0, amax, scale, &o);
    if (m3idx__verify_near(ref, s, scale)) {
      near++;
      ck_assert_msg(m3idx__verify_inside(m3idx__verify_rank(s), &f),
                    "x %a, s %a (%d ulps), scale %a: near but outside [%a, %a]", ref, s, ulps,
                    scale, f.lo, f.hi);
    }
    if (ulps <= 64 && fabsf(ref) >= 1e-20f && fabsf(ref) < 1e28f && isfinite(s) &&
        scale > 0.0f && scale < INFINITY)
      ck_assert_msg(m3idx__verify_near(ref, s, scale), "x %a, s %a: %d ulps, not near", ref,
                    s, ulps);
  }
  ck_assert_int_gt(near, 100000);
}
END_TEST

/* The fused call's work map, given in the options: the same verdicts as
 * without one (the call builds its own); a map built for other lengths,
 * one too small, or one given to a prefill batch is refused, the rows
 * and summary untouched. */
START_TEST(work_map_given) {
  for (int i = 0; i < 2; i++) {
    struct run x;
    run_open(&x, make_case(i, FLAVOR_TIES, M3IDX_DTYPE_BF16));
    exact_candidate(&x);
    const struct test_case *tc = x.tc;
    const int64_t pairs = (int64_t)tc->batch.num_heads * tc->batch.num_rows;
    for (int64_t k = 0; k < pairs * x.width; k++) /* a near candidate */
      if (x.scores[k] == x.scores[k] && fabsf(x.scores[k]) < 1e29f)
        x.scores[k] = nextafterf(x.scores[k], k % 3 ? INFINITY : -INFINITY);
    ids_of_scores(&x);
    ck_assert_int_eq(verify(&x, 1, NULL), M3IDX_OK);
    m3idx_verify_row *without = malloc(sizeof *without * (size_t)pairs);
    memcpy(without, x.rows, sizeof *without * (size_t)pairs);
    const m3idx_verify_summary sum_without = x.sum;
    m3idx_verify_options o;
    m3idx_verify_options_init(&o);
    int32_t cap = 0;
    ck_assert_int_eq(m3idx_work_map_capacity(tc->batch.num_reqs, tc->batch.max_seq_len,
                                             tc->batch.query_len > 0 ? tc->batch.query_len : 1,
                                             tc->batch.num_heads, &cap), M3IDX_OK);
    int32_t *map = malloc(sizeof(int32_t) * 2 * (size_t)cap);
    o.work_map = map;
    o.work_map_capacity = cap;
    if (tc->batch.mode == M3IDX_MODE_DECODE) {
      ck_assert_int_eq(m3idx_work_map_build(x.ctx, &tc->batch, map, cap), M3IDX_OK);
      ck_assert_int_eq(verify(&x, 1, &o), M3IDX_OK);
      ck_assert_int_eq(memcmp(x.rows, without, sizeof *without * (size_t)pairs), 0);
      ck_assert_int_eq(x.sum.exact, sum_without.exact);
      ck_assert_int_eq(x.sum.equivalent, sum_without.equivalent);
      ck_assert(x.sum.max_score_deviation == sum_without.max_score_deviation);
      map[0] = map[0] == 0 ? 1 : 0; /* built for other lengths */
      memset(x.rows, 0x5a, sizeof *x.rows * (size_t)pairs);
      ck_assert_int_eq(verify(&x, 1, &o), M3IDX_ERR_WORK_MAP);
      ck_assert(strstr(m3idx_last_error(x.ctx), "work_map entry 0"));
      o.work_map_capacity = 1;
      ck_assert_int_eq(verify(&x, 1, &o), M3IDX_ERR_WORK_MAP);
      ck_assert(strstr(m3idx_last_error(x.ctx), "work_map_capacity"));
    } else {
      memset(x.rows, 0x5a, sizeof *x.rows * (size_t)pairs);
      ck_assert_int_eq(verify(&x, 1, &o), M3IDX_ERR_INVALID_ARGUMENT);
      ck_assert(strstr(m3idx_last_error(x.ctx), "opts->work_map"));
    }
    for (size_t k = 0; k < sizeof *x.rows * (size_t)pairs; k++)
      ck_assert_int_eq(((unsigned char *)x.rows)[k], 0x5a);
    free(map);
    free(without);
    run_close(&x);
  }
}
END_TEST

START_TEST(bad_arguments) {
  struct run x;
  run_open(&x, make_case(0, FLAVOR_PLAIN, M3IDX_DTYPE_BF16));
  exact_candidate(&x);
  const struct test_case *tc = x.tc;
  m3idx_verify_summary keep;
  memset(&keep, 0x5c, sizeof keep);
  x.sum = keep;
  ck_assert_int_eq(m3idx_verify_topk(x.ctx, &tc->batch, &tc->query, &tc->kcache, 1, 1, NULL,
                                     NULL, 0, NULL, x.rows, &x.sum), M3IDX_ERR_NULL_POINTER);
  ck_assert(strstr(m3idx_last_error(x.ctx), "candidate"));
  m3idx_verify_options o;
  m3idx_verify_options_init(&o);
  o.order = 7;
  ck_assert_int_eq(verify(&x, 0, &o), M3IDX_ERR_INVALID_ARGUMENT);
  ck_assert(strstr(m3idx_last_error(x.ctx), "order"));
  m3idx_verify_options_init(&o);
  o.tolerance_ulps = -1.0;
  ck_assert_int_eq(verify(&x, 0, &o), M3IDX_ERR_INVALID_ARGUMENT);
  ck_assert(strstr(m3idx_last_error(x.ctx), "tolerance_ulps"));
  m3idx_verify_options_init(&o);
  o.flags = 2;
  ck_assert_int_eq(verify(&x, 0, &o), M3IDX_ERR_INVALID_ARGUMENT);
  ck_assert(strstr(m3idx_last_error(x.ctx), "flags"));
  m3idx_verify_options_init(&o);
  o.size = 3;
  ck_assert_int_eq(verify(&x, 0, &o), M3IDX_ERR_OPTIONS);
  ck_assert_int_eq(memcmp(&x.sum, &keep, sizeof keep), 0);
  run_close(&x);
}
END_TEST

int main(void) {
  Suite *s = suite_create("verify");
  TCase *tc = tcase_create("verify");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, no_false_alarm);
  tcase_add_test(tc, one_ulp_near_ties);
  tcase_add_test(tc, e4m3_rounded_query);
  tcase_add_test(tc, structural_mutants);
  tcase_add_test(tc, buggy_scores);
  tcase_add_test(tc, score_at_the_bound);
  tcase_add_test(tc, verdicts_only);
  tcase_add_test(tc, score_stride_past_the_width);
  tcase_add_test(tc, near_rule_is_inside);
  tcase_add_test(tc, work_map_given);
  tcase_add_test(tc, bad_arguments);
  suite_add_tcase(s, tc);
  return run_suite(s);
}
