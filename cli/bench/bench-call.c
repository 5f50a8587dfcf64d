/*
 * bench-call.c - what both engines do alike: one call of a stage through
 * the public API, and a timing from the repeats' seconds.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <math.h>

#include "bench.h"
#include "cli.h"

m3idx_status bench_call_once(const struct bench_call *c, enum bench_mode mode) {
  const int fused = mode != BENCH_SCORE_ONLY;
  if (mode >= BENCH_VERIFY_CALL) {
    m3idx_verify_options o;
    m3idx_verify_options_init(&o);
    o.flags = mode == BENCH_VERIFY_MAX_DEV ? 0 : M3IDX_VERIFY_NO_MAX_DEVIATION;
    o.work_map = c->stage == BENCH_DECODE ? c->map : NULL; /* the fused call's inputs */
    o.work_map_capacity = c->cap;
    return m3idx_verify_topk(c->ctx, &c->batch, &c->q, &c->k, 0, 1, c->cand,
                             mode == BENCH_VERIFY_IDS ? NULL : c->cand_scores, c->stride, &o,
                             NULL, c->summary);
  }
  switch (c->stage) {
  case BENCH_DECODE:
    return fused ? m3idx_index_topk_decode(c->ctx, &c->batch, &c->q, &c->k, 0, 1, c->map,
                                           c->cap, c->topk, c->scores, c->stride)
                 : m3idx_score_decode(c->ctx, &c->batch, &c->q, &c->k, c->map, c->cap,
                                      c->scores, c->stride);
  case BENCH_PREFILL:
    return fused ? m3idx_index_topk_prefill(c->ctx, &c->batch, &c->q, &c->k, 0, 1, c->topk,
                                            c->scores, c->stride)
                 : m3idx_score_prefill(c->ctx, &c->batch, &c->q, &c->k, c->scores, c->stride);
  case BENCH_TOPK:
    return m3idx_topk_from_scores(c->ctx, &c->batch, c->scores, c->stride, c->topk);
  }
  return M3IDX_ERR_INVALID_ARGUMENT;
}

void bench_near_candidate(float *scores, size_t count, uint64_t seed) {
  uint64_t x = seed | 1u;
  for (size_t i = 0; i < count; i++) {
    x ^= x << 13; /* xorshift64 */
    x ^= x >> 7;
    x ^= x << 17;
    if (isfinite(scores[i]) && fabsf(scores[i]) < 1e30f)
      scores[i] = nextafterf(scores[i], x & 1 ? INFINITY : -INFINITY);
  }
}

void bench_timing_of(double *v, int n, struct bench_timing *out) {
  out->median_s = cli_median(v, n); /* sorts v */
  out->unsteady = cli_unsteady(v, n);
  out->spread = v[0] > 0 ? v[n - 1] / v[0] - 1.0 : 0.0;
}
