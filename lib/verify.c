/*
 * verify.c - m3idx_verify_topk: is another indexer's top-k what m3idx
 * computes (exact), what some scores within the bounds of SPEC section 13
 * would give (equivalent), or neither (wrong, with the reason and the
 * proof)?  The exact block scores come from the fused call, the bound's
 * terms from the backend (M3IDX_STAGE_BOUND); the verdicts are decided
 * here, row by row, from each block's interval of possible scores.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "verify-rules.h"
#include "work-map.h"

void m3idx_verify_options_init(m3idx_verify_options *opts) {
  if (opts == NULL)
    return;
  memset(opts, 0, sizeof *opts);
  opts->size = sizeof *opts;
  opts->order = M3IDX_ORDER_DESC;
  opts->query_rounding = M3IDX_QUERY_ROUNDING_NONE;
}

static m3idx_status check_options(m3idx_context *ctx, const m3idx_verify_options *user,
                                  m3idx_verify_options *o) {
  m3idx_verify_options_init(o);
  if (user == NULL)
    return M3IDX_OK;
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
  return M3IDX_OK;
}

/* A block's possible scores: [lo, hi], its reference value and bound (E
 * plus half an ulp of the rounded reference); NaN ranks below -inf. */
struct interval {
  double lo, hi, x, e;
};

#define CLAMP_MAX 0x1.43e1eep+96 /* 0x6fa18f07: SPEC section 6's clamp */
#define NAN_RANK (-INFINITY)     /* a NaN block, below every number */
#define NEG_INF_RANK (-DBL_MAX)  /* a -inf score: above NaN */

/* The interval of block b of a row: ref its pinned, clamped reference
 * score, forced whether pinning wrote it, terms its bound terms. */
static struct interval interval_of(float ref, int forced, const double *terms, double amax,
                                   float scale, const m3idx_verify_options *o) {
  struct interval v;
  v.x = ref;
  v.e = 0.0;
  if (ref != ref) {
    v.lo = v.hi = v.x = NAN_RANK;
    return v;
  }
  if (forced || ref == -INFINITY) {
    v.lo = v.hi = v.x = ref == -INFINITY ? NEG_INF_RANK : (double)ref;
    return v;
  }
  const double e = m3idx__verify_bound(terms[0], terms[1], amax, scale, o->query_rounding,
                                       ref, o->tolerance_rel, o->tolerance_ulps);
  /* The exact score is within half an ulp of its rounding; the margin
     covers this function's own fp64 roundings. */
  v.e = (m3idx__verify_half_ulp(ref) + e) * (1.0 + 0x1p-20);
  v.lo = (double)ref - v.e;
  v.hi = (double)ref + v.e < CLAMP_MAX ? (double)ref + v.e : CLAMP_MAX;
  return v;
}

static int is_forced(int32_t b, int32_t n, int32_t init, int32_t local) {
  return b < init || b >= n - local;
}

/* gap between a block taken (a) and one that beats it (b), in bounds. */
static float gap_of(const struct interval *a, const struct interval *b) {
  const double den = a->e + b->e;
  return den > 0.0 ? (float)((b->x - a->x) / den) : INFINITY;
}

struct row_ctx {
  const int32_t *cand, *ref_ids;
  const float *ref, *cand_scores;
  const double *terms;
  int32_t n, init, local;
  double amax;
  float scale;
  const m3idx_verify_options *o;
  struct interval *iv; /* [n] scratch */
};

/* The structural checks of SPEC section 13: reason or NONE. */
static int32_t structure(const struct row_ctx *r, m3idx_verify_row *out) {
  const int32_t count = r->n < M3IDX_TOPK ? r->n : M3IDX_TOPK;
  for (int32_t j = 0; j < M3IDX_TOPK; j++) {
    const int32_t id = r->cand[j];
    out->slot = j;
    out->block_a = id;
    if (j >= count) {
      if (id != -1)
        return M3IDX_REASON_PADDING;
      continue;
    }
    if (id == -1)
      return M3IDX_REASON_COUNT;
    if (id < 0 || id >= r->n)
      return M3IDX_REASON_ID_RANGE;
    for (int32_t i = 0; i < j; i++)
      if (r->cand[i] == id)
        return M3IDX_REASON_DUPLICATE;
  }
  /* The forced blocks: 0 .. I-1, then n-L .. n-1 (SPEC section 6). */
  const int32_t init_end = r->init < r->n ? r->init : r->n;
  const int32_t local_start = r->n - r->local > 0 ? r->n - r->local : 0;
  for (int32_t b = 0; b < r->n; b++) {
    if (b >= init_end && b < local_start)
      b = local_start; /* past the blocks between */
    if (b >= r->n)
      break;
    int found = 0;
    for (int32_t j = 0; j < count; j++)
      found |= r->cand[j] == b;
    if (!found) {
      out->slot = -1;
      out->block_a = b;
      return M3IDX_REASON_FORCED;
    }
  }
  return M3IDX_REASON_NONE;
}

static void verify_row(const struct row_ctx *r, m3idx_verify_row *out, double *max_dev) {
  memset(out, 0, sizeof *out);
  out->slot = -1;
  out->block_a = out->block_b = -1;
  const int32_t count = r->n < M3IDX_TOPK ? r->n : M3IDX_TOPK;
  for (int32_t b = 0; b < r->n; b++)
    r->iv[b] = interval_of(r->ref[b], is_forced(b, r->n, r->init, r->local),
                           r->terms + 2 * (int64_t)b, r->amax, r->scale, r->o);
  int32_t reason = structure(r, out);
  /* Candidate scores: the clamped, unpinned score of every block that is
     not forced, within its interval. */
  int32_t bad_score = -1;
  float bad_dev = 0.0f;
  if (r->cand_scores != NULL) {
    for (int32_t b = 0; b < r->n; b++) {
      if (is_forced(b, r->n, r->init, r->local))
        continue;
      const struct interval *v = &r->iv[b];
      double s = r->cand_scores[b];
      s = s != s ? NAN_RANK : s == -INFINITY ? NEG_INF_RANK : s > CLAMP_MAX ? CLAMP_MAX : s;
      const double dev = s == v->x ? 0.0 : v->e > 0.0 ? fabs(s - v->x) / v->e : INFINITY;
      *max_dev = dev > *max_dev ? dev : *max_dev;
      if ((s < v->lo || s > v->hi) && bad_score < 0) {
        bad_score = b;
        bad_dev = (float)dev;
      }
    }
  }
  if (reason == M3IDX_REASON_NONE) {
    if (memcmp(r->cand, r->ref_ids, sizeof(int32_t) * M3IDX_TOPK) != 0) {
      /* The set: the taken block of the lowest possible best against the
         left-out block of the highest possible worst. */
      int32_t a = -1, b = -1;
      for (int32_t j = 0; j < count; j++)
        if (a < 0 || r->iv[r->cand[j]].hi < r->iv[a].hi)
          a = r->cand[j];
      for (int32_t k = 0; k < r->n; k++) {
        if (b >= 0 && r->iv[k].lo <= r->iv[b].lo)
          continue;
        int taken = 0;
        for (int32_t j = 0; j < count; j++)
          taken |= r->cand[j] == k;
        if (!taken)
          b = k;
      }
      if (b >= 0 && r->iv[b].lo > r->iv[a].hi) {
        reason = M3IDX_REASON_SET;
        out->block_a = a;
        out->block_b = b;
        out->gap = gap_of(&r->iv[a], &r->iv[b]);
      } else if (r->o->order == M3IDX_ORDER_DESC) {
        for (int32_t j = 0; j + 1 < count; j++) {
          const struct interval *x = &r->iv[r->cand[j]], *y = &r->iv[r->cand[j + 1]];
          if (y->lo > x->hi) {
            reason = M3IDX_REASON_ORDER;
            out->slot = j;
            out->block_a = r->cand[j];
            out->block_b = r->cand[j + 1];
            out->gap = gap_of(x, y);
            break;
          }
        }
      }
    }
    if (reason == M3IDX_REASON_NONE && bad_score >= 0) {
      reason = M3IDX_REASON_SCORE;
      out->block_a = bad_score;
      out->gap = bad_dev;
    }
  }
  out->reason = reason;
  out->verdict = reason != M3IDX_REASON_NONE ? M3IDX_VERDICT_WRONG
               : memcmp(r->cand, r->ref_ids, sizeof(int32_t) * M3IDX_TOPK) == 0
                   ? M3IDX_VERDICT_EXACT
                   : M3IDX_VERDICT_EQUIVALENT;
}

static double row_amax(const m3idx_query *q, int64_t first) {
  double m = 0.0;
  for (int d = 0; d < M3IDX_HEAD_DIM; d++) {
    const double v = fabs((double)(q->dtype == M3IDX_DTYPE_BF16
                                       ? m3idx__bf16_value(((const uint16_t *)q->data)[first + d])
                                       : m3idx__e4m3_value(((const uint8_t *)q->data)[first + d])));
    m = v > m || v != v ? v : m;
  }
  return m;
}

m3idx_status m3idx_verify_topk(m3idx_context *ctx, const m3idx_batch *batch,
                               const m3idx_query *query, const m3idx_kcache *kcache,
                               int32_t init_blocks, int32_t local_blocks,
                               const int32_t *candidate, const float *candidate_scores,
                               int64_t score_stride, const m3idx_verify_options *opts,
                               m3idx_verify_row *rows, m3idx_verify_summary *summary) {
  struct m3idx_call c = {.stage = M3IDX_STAGE_BOUND};
  m3idx_verify_options o;
  if (ctx == NULL)
    return m3idx__fail(NULL, M3IDX_ERR_NULL_POINTER, "ctx is NULL");
  m3idx__clear_error(ctx);
  m3idx_status st = m3idx__check_batch(ctx, batch, 0, &c);
  if (st == M3IDX_OK)
    st = m3idx__check_query(ctx, query, &c);
  if (st == M3IDX_OK)
    st = m3idx__check_kcache(ctx, kcache, &c);
  if (st == M3IDX_OK)
    st = m3idx__check_forced(ctx, init_blocks, local_blocks, &c);
  if (st == M3IDX_OK && candidate == NULL)
    st = m3idx__fail(ctx, M3IDX_ERR_NULL_POINTER, "candidate is NULL");
  if (st == M3IDX_OK)
    st = m3idx__check_scores(ctx, candidate_scores, score_stride, 1, &c);
  if (st == M3IDX_OK)
    st = check_options(ctx, opts, &o);
  if (st != M3IDX_OK)
    return st;
  if (!ctx->host_visible)
    return m3idx__fail(ctx, M3IDX_ERR_UNSUPPORTED,
                       "m3idx_verify_topk reads the batch on the host: use a CPU context or "
                       "M3IDX_FLAG_HOST_POINTERS");
  const int64_t pairs = (int64_t)c.num_heads * c.num_rows, width = c.width;
  const int64_t stride = candidate_scores ? c.score_stride : width;
  m3idx_verify_summary sum = {0};
  sum.rows = pairs;
  if (pairs == 0) {
    if (summary)
      *summary = sum;
    return M3IDX_OK;
  }
  float *ref = malloc(sizeof(float) * (size_t)(pairs * width));
  int32_t *ref_ids = malloc(sizeof(int32_t) * (size_t)(pairs * M3IDX_TOPK));
  double *terms = malloc(sizeof(double) * 2 * (size_t)(pairs * width));
  struct interval *iv = malloc(sizeof *iv * (size_t)width);
  int32_t *pos = malloc(sizeof(int32_t) * (size_t)c.num_rows);
  m3idx_verify_row *verdicts = malloc(sizeof *verdicts * (size_t)pairs);
  if (!ref || !ref_ids || !terms || !iv || !pos || !verdicts) {
    st = m3idx__fail(ctx, M3IDX_ERR_NO_MEMORY, "no memory to verify %lld rows of %lld blocks",
                     (long long)pairs, (long long)width);
    goto out;
  }
  st = c.mode == M3IDX_MODE_DECODE
           ? m3idx_index_topk_decode(ctx, batch, query, kcache, init_blocks, local_blocks,
                                     NULL, 0, ref_ids, ref, width)
           : m3idx_index_topk_prefill(ctx, batch, query, kcache, init_blocks, local_blocks,
                                      ref_ids, ref, width);
  if (st != M3IDX_OK)
    goto out;
  c.bound_terms = terms;
  struct m3idx_errbuf err;
  err.msg[0] = '\0';
  st = m3idx__backend_failed(ctx, ctx->ops->run(ctx->state, &c, &err), &err);
  if (st != M3IDX_OK)
    goto out;
  m3idx__row_positions(&c, pos);
  for (int64_t hr = 0; hr < pairs; hr++) {
    const int32_t h = (int32_t)(hr / c.num_rows), row = (int32_t)(hr % c.num_rows);
    struct row_ctx r = {
        .cand = candidate + hr * M3IDX_TOPK,
        .ref_ids = ref_ids + hr * M3IDX_TOPK,
        .ref = ref + hr * width,
        .cand_scores = candidate_scores ? candidate_scores + hr * stride : NULL,
        .terms = terms + 2 * hr * width,
        .n = pos[row] / M3IDX_BLOCK_SIZE + 1,
        .init = init_blocks,
        .local = local_blocks,
        .amax = row_amax(query, ((int64_t)row * c.num_heads + h) * M3IDX_HEAD_DIM),
        .scale = query->scale,
        .o = &o,
        .iv = iv,
    };
    verify_row(&r, &verdicts[hr], &sum.max_score_deviation);
    sum.exact += verdicts[hr].verdict == M3IDX_VERDICT_EXACT;
    sum.equivalent += verdicts[hr].verdict == M3IDX_VERDICT_EQUIVALENT;
    sum.wrong += verdicts[hr].verdict == M3IDX_VERDICT_WRONG;
  }
  if (rows)
    memcpy(rows, verdicts, sizeof *verdicts * (size_t)pairs);
  if (summary)
    *summary = sum;
out:
  free(ref);
  free(ref_ids);
  free(terms);
  free(iv);
  free(pos);
  free(verdicts);
  return st;
}
