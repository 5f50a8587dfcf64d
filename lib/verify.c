/*
 * verify.c - m3idx_verify_topk: is another indexer's top-k what m3idx
 * computes (exact), what some scores within the bounds of SPEC section 13
 * would give (equivalent), or neither (wrong, with the reason and the
 * proof)?  On host memory the exact block scores come from the fused call,
 * the bound's terms from the backend (M3IDX_STAGE_BOUND), and the verdicts
 * are decided here, row by row, from each block's interval of possible
 * scores (lib/verify-row.h); on device memory the backend decides them
 * where the memory is, from the same pieces (M3IDX_STAGE_VERIFY).
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "call-checks.h"
#include "checks.h"
#include "fp-env.h"
#include "verify-row.h"
#include "work-map.h"

void m3idx_verify_options_init(m3idx_verify_options *opts) {
  if (opts == NULL)
    return;
  memset(opts, 0, sizeof *opts);
  opts->size = sizeof *opts;
  opts->order = M3IDX_ORDER_DESC;
  opts->query_rounding = M3IDX_QUERY_ROUNDING_NONE;
}

/* The options, and the work map they may carry into c. */
static m3idx_status check_options(m3idx_context *ctx, const m3idx_verify_options *user,
                                  m3idx_verify_options *o, struct m3idx_call *c) {
  m3idx_verify_options_init(o);
  if (user == NULL)
    return m3idx__check_work_map(ctx, NULL, 0, 0, c);
  if (user->size != sizeof *user)
    return m3idx__fail(ctx, M3IDX_ERR_OPTIONS,
                       "opts->size is %zu, not sizeof(m3idx_verify_options) %zu: call "
                       "m3idx_verify_options_init", user->size, sizeof *user);
  *o = *user;
  if (o->order != M3IDX_ORDER_DESC && o->order != M3IDX_ORDER_ANY)
    return m3idx__fail(ctx, M3IDX_ERR_INVALID_ARGUMENT,
                       "opts->order is %d, not M3IDX_ORDER_DESC (0) or M3IDX_ORDER_ANY (1)",
                       (int)o->order);
  if (o->query_rounding != M3IDX_QUERY_ROUNDING_NONE &&
      o->query_rounding != M3IDX_QUERY_ROUNDING_BF16 &&
      o->query_rounding != M3IDX_QUERY_ROUNDING_E4M3)
    return m3idx__fail(ctx, M3IDX_ERR_INVALID_ARGUMENT,
                       "opts->query_rounding is %d, not NONE (0), BF16 (1) or E4M3 (2)",
                       (int)o->query_rounding);
  if (!(o->tolerance_rel >= 0.0 && o->tolerance_rel < INFINITY))
    return m3idx__fail(ctx, M3IDX_ERR_INVALID_ARGUMENT,
                       "opts->tolerance_rel is %g, must be finite and >= 0", o->tolerance_rel);
  if (!(o->tolerance_ulps >= 0.0 && o->tolerance_ulps < INFINITY))
    return m3idx__fail(ctx, M3IDX_ERR_INVALID_ARGUMENT,
                       "opts->tolerance_ulps is %g, must be finite and >= 0", o->tolerance_ulps);
  if (o->flags & ~M3IDX_VERIFY_NO_MAX_DEVIATION)
    return m3idx__fail(ctx, M3IDX_ERR_INVALID_ARGUMENT,
                       "opts->flags is 0x%x, not a combination of M3IDX_VERIFY_NO_MAX_DEVIATION",
                       (unsigned)o->flags);
  if (o->work_map != NULL && c->mode != M3IDX_MODE_DECODE)
    return m3idx__fail(ctx, M3IDX_ERR_INVALID_ARGUMENT,
                       "opts->work_map is for decode batches: a prefill batch takes none");
  return m3idx__check_work_map(ctx, o->work_map, o->work_map_capacity, 0, c);
}

typedef struct m3idx_verify_interval interval;

/* One call's verification, on the host.  terms/known are [pairs, width]:
 * a block's bound terms are computed only when a verdict depends on them
 * (see verify_row), in rounds on the backend, so verifying a candidate
 * that mostly agrees costs little more than the fused call. */
struct verify {
  const struct m3idx_call *c;     /* host pointers for the metadata */
  const int32_t *pos, *req;       /* each row's position and request */
  int64_t width;
  double *terms;                  /* [pairs, width, 2]: a floor, then the terms */
  uint8_t *known;                 /* [pairs, width]: enum known */
  int32_t *items;                 /* [cap, 3] for the backend */
  int64_t *item_at;               /* [cap]: the (pair, block) of each item */
  int64_t n_items, cap_items;
  double max_dev;                 /* the largest known deviation so far */
};

/* What is known of a block's terms.  The floor is the terms of one key
 * (m3idx__verify_floor_key), which no block's terms are below: cheap,
 * and mostly close to the truth, so it settles most blocks. */
enum known { NOTHING, TERMS_ASKED, TERMS, FLOOR_ASKED, FLOOR };

/* Ask the backend for block b's terms, or its floor (keys negated). */
static void ask(struct verify *v, int64_t hr, int32_t b, int floor_only) {
  const int64_t at = hr * v->width + b;
  if (v->n_items == v->cap_items)
    return; /* the next round asks again */
  const int32_t h = (int32_t)(hr / v->c->num_rows), row = (int32_t)(hr % v->c->num_rows);
  int32_t *it = v->items + 3 * v->n_items;
  it[0] = row * v->c->num_heads + h;
  it[1] = v->c->block_table[(int64_t)v->req[row] * v->c->bt_stride + b];
  it[2] = m3idx__keys_seen(v->pos[row], b) * (floor_only ? -1 : 1);
  v->item_at[v->n_items++] = at;
  v->known[at] = floor_only ? FLOOR_ASKED : TERMS_ASKED;
}

/* The block's terms, or NULL after asking for them (*pending set). */
static const double *terms_of(struct verify *v, int64_t hr, int32_t b, int *pending) {
  const int64_t at = hr * v->width + b;
  if (v->known[at] == TERMS)
    return v->terms + 2 * at;
  *pending = 1;
  if (v->known[at] == NOTHING || v->known[at] == FLOOR)
    ask(v, hr, b, 0);
  return NULL;
}

struct row_ctx {
  struct verify *v;
  int64_t hr;
  const int32_t *cand, *ref_ids;
  const float *ref, *cand_scores;
  int32_t n, init, local;
  double amax;
  float scale;
  const m3idx_verify_options *o;
};

/* Block b's interval from its terms (never from fewer than the truth). */
static interval tight(const struct row_ctx *r, int32_t b, const double *t) {
  return m3idx__verify_interval(r->ref[b], m3idx__verify_is_forced(b, r->n, r->init, r->local),
                                t[0], t[1], r->amax, r->scale, r->o);
}

/* Block b's interval when its E is known without terms (pinned, -inf,
 * NaN), or from the floor of its terms: never wider than tight()'s,
 * since the bound grows with each term. */
static interval floor_of(const struct row_ctx *r, int32_t b, int *needs_terms) {
  const float x = r->ref[b];
  const int fixed = m3idx__verify_fixed(x, m3idx__verify_is_forced(b, r->n, r->init, r->local));
  double t[2] = {fixed ? 0.0 : m3idx__verify_a_floor(x, r->scale), 0.0};
  const int64_t at = r->hr * r->v->width + b;
  const uint8_t k = r->v->known[at];
  if (!fixed && (k == FLOOR || k == TERMS)) {
    const double *f = r->v->terms + 2 * at;
    t[0] = f[0] > t[0] ? f[0] : t[0];
    t[1] = f[1];
  }
  *needs_terms = !fixed;
  return tight(r, b, t);
}

/* Block b's interval, or NULL-like (ok = 0) while its terms are asked for. */
static int interval_at(const struct row_ctx *r, int32_t b, interval *out, int *pending) {
  int needs;
  *out = floor_of(r, b, &needs);
  if (!needs)
    return 1;
  const double *t = terms_of(r->v, r->hr, b, pending);
  if (t == NULL)
    return 0;
  *out = tight(r, b, t);
  return 1;
}

/* The structural checks of SPEC section 13: reason or NONE. */
static int32_t structure(const struct row_ctx *r, m3idx_verify_row *out) {
  const int32_t reason = m3idx__verify_slots(r->cand, r->n, &out->slot, &out->block_a);
  if (reason != M3IDX_REASON_NONE)
    return reason;
  const int32_t count = r->n < M3IDX_TOPK ? r->n : M3IDX_TOPK;
  const int32_t forced = m3idx__verify_forced_count(r->n, r->init, r->local);
  for (int32_t i = 0; i < forced; i++) {
    const int32_t b = m3idx__verify_forced_block(i, r->n, r->init, r->local);
    if (!m3idx__verify_taken(r->cand, count, b)) {
      out->block_a = b;
      return M3IDX_REASON_FORCED;
    }
  }
  return M3IDX_REASON_NONE;
}

/* The candidate's scores: *bad the first block outside its interval (or
 * -1), *dev_known the largest deviation known.  Deviations only bounded
 * from above (by the floor) ask for terms when the bound exceeds the
 * largest known: the call's largest deviation is then exact. */
static void check_scores(const struct row_ctx *r, int want_inside, int32_t *bad, float *bad_dev,
                         double *dev_known, int *pending) {
  *bad = -1;
  int32_t top = -1;
  double top_ub = 0.0;
  for (int32_t b = 0; b < r->n; b++) {
    if (m3idx__verify_is_forced(b, r->n, r->init, r->local))
      continue;
    int needs;
    const interval f = floor_of(r, b, &needs);
    const double s = m3idx__verify_rank(r->cand_scores[b]);
    const double ub = m3idx__verify_deviation(s, &f);
    const int surely_inside = m3idx__verify_inside(s, &f);
    const int64_t at = r->hr * r->v->width + b;
    interval v = f;
    const uint8_t k = r->v->known[at];
    if (needs && k == TERMS)
      v = tight(r, b, r->v->terms + 2 * at);
    else if (needs && ub > 0.0) {
      /* Terms unknown: needed when the verdict or the largest deviation
         may depend on them.  The floor first; then the terms, though
         while no deviation is known only the row's largest is asked. */
      const int for_dev = ub > r->v->max_dev && !(r->o->flags & M3IDX_VERIFY_NO_MAX_DEVIATION);
      const int inside = want_inside && !surely_inside;
      if (!inside && !for_dev)
        continue;
      *pending = 1;
      if (k == NOTHING)
        ask(r->v, r->hr, b, 1);
      else if (k == FLOOR && (inside || r->v->max_dev > 0.0))
        ask(r->v, r->hr, b, 0);
      else if (k == FLOOR && ub > top_ub) {
        top_ub = ub;
        top = b;
      }
      continue;
    }
    const double dev = m3idx__verify_deviation(s, &v);
    *dev_known = dev > *dev_known ? dev : *dev_known;
    if (!m3idx__verify_inside(s, &v) && *bad < 0) {
      *bad = b;
      *bad_dev = (float)dev;
    }
  }
  if (top >= 0)
    (void)terms_of(r->v, r->hr, top, pending);
}

/* Decide the row, or leave it pending (0) with the terms it needs asked
 * for.  The verdict is the one every block's terms would give: only
 * blocks whose interval can change it are looked at. */
static int verify_row(const struct row_ctx *r, m3idx_verify_row *out, double *dev_known) {
  memset(out, 0, sizeof *out);
  out->slot = -1;
  out->block_a = out->block_b = -1;
  *dev_known = 0.0;
  int pending = 0;
  const int32_t count = r->n < M3IDX_TOPK ? r->n : M3IDX_TOPK;
  int32_t reason = structure(r, out);
  const int differs = memcmp(r->cand, r->ref_ids, sizeof(int32_t) * M3IDX_TOPK) != 0;
  int32_t bad_score = -1;
  float bad_dev = 0.0f;
  if (r->cand_scores != NULL)
    check_scores(r, reason == M3IDX_REASON_NONE, &bad_score, &bad_dev, dev_known, &pending);
  if (reason == M3IDX_REASON_NONE && differs) {
    /* The set: the taken block of the lowest possible best against the
       left-out block of the highest possible worst; a left-out block can
       beat a taken one only if its score is above that one's top. */
    interval taken[M3IDX_TOPK], iv_a, iv_b;
    int have = 1;
    for (int32_t j = 0; j < count; j++)
      have &= interval_at(r, r->cand[j], &taken[j], &pending);
    if (!have)
      return 0;
    int32_t a = -1, ja = -1, b = -1;
    for (int32_t j = 0; j < count; j++)
      if (a < 0 || taken[j].hi < taken[ja].hi) {
        a = r->cand[j];
        ja = j;
      }
    iv_a = taken[ja];
    for (int32_t k = 0; k < r->n; k++) {
      if (!(m3idx__verify_rank(r->ref[k]) > iv_a.hi))
        continue;
      interval iv;
      if (m3idx__verify_taken(r->cand, count, k) || !interval_at(r, k, &iv, &pending))
        continue;
      if (b < 0 || iv.lo > iv_b.lo) {
        b = k;
        iv_b = iv;
      }
    }
    if (pending)
      return 0;
    if (b >= 0 && iv_b.lo > iv_a.hi) {
      reason = M3IDX_REASON_SET;
      out->slot = ja;
      out->block_a = a;
      out->block_b = b;
      out->gap = m3idx__verify_gap(&iv_a, &iv_b);
    } else if (r->o->order == M3IDX_ORDER_DESC) {
      for (int32_t j = 0; j + 1 < count; j++) {
        const interval *x = &taken[j], *y = &taken[j + 1];
        if (y->lo > x->hi) {
          reason = M3IDX_REASON_ORDER;
          out->slot = j;
          out->block_a = r->cand[j];
          out->block_b = r->cand[j + 1];
          out->gap = m3idx__verify_gap(x, y);
          break;
        }
      }
    }
  }
  if (pending)
    return 0;
  if (reason == M3IDX_REASON_NONE && bad_score >= 0) {
    reason = M3IDX_REASON_SCORE;
    out->block_a = bad_score;
    out->gap = bad_dev;
  }
  out->reason = reason;
  out->verdict = reason != M3IDX_REASON_NONE ? M3IDX_VERDICT_WRONG
               : !differs                   ? M3IDX_VERDICT_EXACT
                                            : M3IDX_VERDICT_EQUIVALENT;
  return 1;
}

static double row_amax(const void *query, m3idx_dtype dtype, int64_t first) {
  double m = 0.0;
  for (int d = 0; d < M3IDX_HEAD_DIM; d++) {
    const double v = fabs((double)(dtype == M3IDX_DTYPE_BF16
                                       ? m3idx__bf16_value(((const uint16_t *)query)[first + d])
                                       : m3idx__e4m3_value(((const uint8_t *)query)[first + d])));
    m = v > m || v != v ? v : m;
  }
  return m;
}

/* The bound's terms of the items asked for, on the backend. */
static m3idx_status run_bounds(m3idx_context *ctx, struct verify *v, const struct m3idx_call *c,
                               double *out) {
  struct m3idx_call b = *c;
  b.stage = M3IDX_STAGE_BOUND;
  b.bound_items = v->items;
  b.bound_count = v->n_items;
  b.bound_terms = out;
  struct m3idx_errbuf err;
  err.msg[0] = '\0';
  return m3idx__backend_failed(ctx, ctx->ops->run(ctx->state, &b, &err), &err);
}

/* The summary of pairs verdicts and their rows' largest deviations. */
static m3idx_verify_summary summarize(const m3idx_verify_row *verdicts, const double *row_dev,
                                      int64_t pairs, const m3idx_verify_options *o) {
  m3idx_verify_summary sum = {0};
  sum.rows = pairs;
  for (int64_t hr = 0; hr < pairs; hr++) {
    sum.exact += verdicts[hr].verdict == M3IDX_VERDICT_EXACT;
    sum.equivalent += verdicts[hr].verdict == M3IDX_VERDICT_EQUIVALENT;
    sum.wrong += verdicts[hr].verdict == M3IDX_VERDICT_WRONG;
    sum.max_score_deviation =
        row_dev[hr] > sum.max_score_deviation ? row_dev[hr] : sum.max_score_deviation;
  }
  if (o->flags & M3IDX_VERIFY_NO_MAX_DEVIATION)
    sum.max_score_deviation = NAN;
  return sum;
}

/* Memory the host cannot read: the backend decides the verdicts where it
 * is (M3IDX_STAGE_VERIFY) and the call waits once. */
static m3idx_status verify_on_backend(m3idx_context *ctx, struct m3idx_call c,
                                      const int32_t *candidate, const float *cand_scores,
                                      const m3idx_verify_options *o, m3idx_verify_row *rows,
                                      m3idx_verify_summary *summary) {
  const int64_t pairs = (int64_t)c.num_heads * c.num_rows;
  m3idx_verify_row *verdicts = malloc(sizeof *verdicts * (size_t)pairs);
  double *row_dev = malloc(sizeof(double) * (size_t)pairs);
  m3idx_status st = M3IDX_OK;
  if (verdicts == NULL || row_dev == NULL) {
    st = m3idx__fail(ctx, M3IDX_ERR_NO_MEMORY, "no memory for the verdicts of %lld rows",
                     (long long)pairs);
  } else {
    c.stage = M3IDX_STAGE_VERIFY;
    c.candidate = candidate;
    c.cand_scores = cand_scores;
    c.cand_stride = c.score_stride;
    c.scores = NULL;
    c.score_stride = c.width;
    c.topk = NULL;
    c.verify_opts = o;
    c.verify_rows = verdicts;
    c.verify_dev = row_dev;
    struct m3idx_errbuf err;
    err.msg[0] = '\0';
    st = m3idx__backend_failed(ctx, ctx->ops->run(ctx->state, &c, &err), &err);
  }
  if (st == M3IDX_OK) {
    if (rows)
      memcpy(rows, verdicts, sizeof *verdicts * (size_t)pairs);
    if (summary)
      *summary = summarize(verdicts, row_dev, pairs, o);
  }
  free(verdicts);
  free(row_dev);
  return st;
}

/* Every argument check of m3idx_verify_topk, into c and o. */
static m3idx_status check_verify(m3idx_context *ctx, const m3idx_batch *batch,
                                 const m3idx_query *query, const m3idx_kcache *kcache,
                                 int32_t init_blocks, int32_t local_blocks,
                                 const int32_t *candidate, const float *candidate_scores,
                                 int64_t score_stride, const m3idx_verify_options *opts,
                                 struct m3idx_call *c, m3idx_verify_options *o) {
  m3idx_status st = m3idx__check_batch(ctx, batch, 0, c);
  if (st == M3IDX_OK)
    st = m3idx__check_query(ctx, query, c);
  if (st == M3IDX_OK)
    st = m3idx__check_kcache(ctx, kcache, c);
  if (st == M3IDX_OK)
    st = m3idx__check_forced(ctx, init_blocks, local_blocks, c);
  if (st == M3IDX_OK && candidate == NULL)
    st = m3idx__fail(ctx, M3IDX_ERR_NULL_POINTER, "candidate is NULL");
  if (st == M3IDX_OK)
    st = m3idx__check_scores(ctx, candidate_scores, score_stride, 1, c);
  if (st == M3IDX_OK)
    st = check_options(ctx, opts, o, c);
  return st;
}

m3idx_status m3idx__check_verify_topk(const m3idx_batch *batch, const m3idx_query *query,
                                      const m3idx_kcache *kcache, int32_t init_blocks,
                                      int32_t local_blocks, const int32_t *candidate,
                                      const float *candidate_scores, int64_t score_stride,
                                      const m3idx_verify_options *opts) {
  struct m3idx_context probe;
  m3idx__probe_context(&probe);
  struct m3idx_call c = {.stage = M3IDX_STAGE_FUSED};
  m3idx_verify_options o;
  const m3idx_status st = check_verify(&probe, batch, query, kcache, init_blocks, local_blocks,
                                       candidate, candidate_scores, score_stride, opts, &c, &o);
  return st == M3IDX_OK ? M3IDX_OK : m3idx__fail(NULL, st, "%s", probe.err.msg);
}

m3idx_status m3idx_verify_topk(m3idx_context *ctx, const m3idx_batch *batch,
                               const m3idx_query *query, const m3idx_kcache *kcache,
                               int32_t init_blocks, int32_t local_blocks,
                               const int32_t *candidate, const float *candidate_scores,
                               int64_t score_stride, const m3idx_verify_options *opts,
                               m3idx_verify_row *rows, m3idx_verify_summary *summary) {
  struct m3idx_call c = {.stage = M3IDX_STAGE_FUSED};
  m3idx_verify_options o;
  if (ctx == NULL)
    return m3idx__fail(NULL, M3IDX_ERR_NULL_POINTER, "ctx is NULL");
  m3idx__clear_error(ctx);
  m3idx_status st = check_verify(ctx, batch, query, kcache, init_blocks, local_blocks, candidate,
                                 candidate_scores, score_stride, opts, &c, &o);
  if (st != M3IDX_OK)
    return st;
  c.work_map_in = o.work_map;
  const int64_t pairs = (int64_t)c.num_heads * c.num_rows, width = c.width;
  if (pairs == 0) {
    if (summary)
      *summary = (m3idx_verify_summary){.rows = 0};
    return M3IDX_OK;
  }
  if (!ctx->host_visible)
    return verify_on_backend(ctx, c, candidate, candidate_scores, &o, rows, summary);
  const struct m3idx_call hc = c; /* c's outputs change below */
  float *ref = malloc(sizeof(float) * (size_t)(pairs * width));
  int32_t *ref_ids = malloc(sizeof(int32_t) * (size_t)(pairs * M3IDX_TOPK));
  double *terms = malloc(sizeof(double) * 2 * (size_t)(pairs * width));
  double *amax = malloc(sizeof(double) * (size_t)pairs);
  double *row_dev = calloc((size_t)pairs, sizeof(double));
  uint8_t *known = calloc((size_t)(pairs * width), 1);
  uint8_t *done = calloc((size_t)pairs, 1);
  int32_t *pos = malloc(sizeof(int32_t) * (size_t)c.num_rows);
  int32_t *req = malloc(sizeof(int32_t) * (size_t)c.num_rows);
  m3idx_verify_row *verdicts = malloc(sizeof *verdicts * (size_t)pairs);
  struct verify v = {0};
  v.cap_items = pairs * width < ((int64_t)1 << 20) ? pairs * width : (int64_t)1 << 20;
  v.items = malloc(sizeof(int32_t) * 3 * (size_t)v.cap_items);
  v.item_at = malloc(sizeof(int64_t) * (size_t)v.cap_items);
  double *item_terms = malloc(sizeof(double) * 2 * (size_t)v.cap_items);
  if (!ref || !ref_ids || !terms || !amax || !row_dev || !known || !done || !pos || !req ||
      !verdicts || !v.items || !v.item_at || !item_terms) {
    st = m3idx__fail(ctx, M3IDX_ERR_NO_MEMORY, "no memory to verify %lld rows of %lld blocks",
                     (long long)pairs, (long long)width);
    goto out;
  }
  const int64_t cand_stride = c.score_stride; /* the candidate's; c's becomes the width */
  /* The exact scores and top-k. */
  c.scores = ref;
  c.score_stride = width;
  c.topk = ref_ids;
  {
    struct m3idx_errbuf err;
    err.msg[0] = '\0';
    st = m3idx__backend_failed(ctx, ctx->ops->run(ctx->state, &c, &err), &err);
    if (st != M3IDX_OK)
      goto out;
  }
  m3idx__row_positions(&hc, pos);
  for (int32_t r = 0, row = 0; r < c.num_reqs; r++) {
    const int32_t end = c.mode == M3IDX_MODE_DECODE ? (r + 1) * c.query_len : hc.cu_seqlens_q[r + 1];
    for (; row < end; row++)
      req[row] = r;
  }
  for (int64_t hr = 0; hr < pairs; hr++) {
    const int32_t hd = (int32_t)(hr / c.num_rows), row = (int32_t)(hr % c.num_rows);
    amax[hr] = row_amax(query->data, c.query_dtype, ((int64_t)row * c.num_heads + hd) * M3IDX_HEAD_DIM);
  }
  /* The intervals are fp64 arithmetic in the reference's environment. */
  const m3idx_fpenv env = m3idx__fpenv_enter();
  v.c = &hc;
  v.pos = pos;
  v.req = req;
  v.width = width;
  v.terms = terms;
  v.known = known;
  for (;;) { /* rounds: decide what can be, ask for the terms the rest needs */
    /* The largest deviation known decides which deviations need terms. */
    for (int64_t hr = 0; hr < pairs; hr++)
      v.max_dev = row_dev[hr] > v.max_dev ? row_dev[hr] : v.max_dev;
    v.n_items = 0;
    int64_t open = 0;
    for (int64_t hr = 0; hr < pairs; hr++) {
      if (done[hr])
        continue;
      const int32_t row = (int32_t)(hr % c.num_rows);
      const struct row_ctx r = {
          .v = &v,
          .hr = hr,
          .cand = candidate + hr * M3IDX_TOPK,
          .ref_ids = ref_ids + hr * M3IDX_TOPK,
          .ref = ref + hr * width,
          .cand_scores = candidate_scores ? candidate_scores + hr * cand_stride : NULL,
          .n = pos[row] / M3IDX_BLOCK_SIZE + 1,
          .init = init_blocks,
          .local = local_blocks,
          .amax = amax[hr],
          .scale = query->scale,
          .o = &o,
      };
      done[hr] = (uint8_t)verify_row(&r, &verdicts[hr], &row_dev[hr]);
      open += !done[hr];
    }
    if (open == 0)
      break;
    if (v.n_items == 0) /* cannot happen; if it did, every block's terms end it */
      for (int64_t hr = 0; hr < pairs; hr++)
        for (int32_t b = 0; !done[hr] && b <= pos[hr % c.num_rows] / M3IDX_BLOCK_SIZE; b++) {
          int ignored;
          (void)terms_of(&v, hr, b, &ignored);
        }
    st = run_bounds(ctx, &v, &c, item_terms);
    if (st != M3IDX_OK)
      break;
    for (int64_t i = 0; i < v.n_items; i++) {
      memcpy(terms + 2 * v.item_at[i], item_terms + 2 * i, 2 * sizeof(double));
      known[v.item_at[i]] = known[v.item_at[i]] == FLOOR_ASKED ? FLOOR : TERMS;
    }
  }
  m3idx__fpenv_leave(env);
  if (st != M3IDX_OK)
    goto out;
  if (rows)
    memcpy(rows, verdicts, sizeof *verdicts * (size_t)pairs);
  if (summary)
    *summary = summarize(verdicts, row_dev, pairs, &o);
out:
  free(ref);
  free(ref_ids);
  free(terms);
  free(amax);
  free(row_dev);
  free(known);
  free(done);
  free(pos);
  free(req);
  free(verdicts);
  free(v.items);
  free(v.item_at);
  free(item_terms);
  return st;
}
