/*
 * bench-call.c - what both engines do alike: one call of a stage through
 * the public API, and a timing from the repeats' seconds.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include "bench.h"
#include "cli.h"

m3idx_status bench_call_once(const struct bench_call *c, int fused) {
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

void bench_timing_of(double *v, int n, struct bench_timing *out) {
  out->median_s = cli_median(v, n); /* sorts v */
  out->unsteady = cli_unsteady(v, n);
  out->spread = v[0] > 0 ? v[n - 1] / v[0] - 1.0 : 0.0;
}
