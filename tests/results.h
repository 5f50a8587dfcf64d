/*
 * results.h - everything one call pattern produces, from the library (on
 * any context) or from the oracle, and a byte-exact comparison.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_TEST_RESULTS_H
#define M3IDX_TEST_RESULTS_H

#include <stddef.h>

#include "cases.h"

struct case_results {
  int64_t stride;          /* score row stride (width + 3: a caller's stride) */
  float *scores;           /* m3idx_score_*: clamped, unpinned */
  float *scores_mapped;    /* decode: the same, scheduled by a built work map */
  float *pinned;           /* m3idx_pin_forced_blocks on a copy of scores */
  int32_t *topk;           /* m3idx_topk_from_scores of pinned */
  int32_t *fused_topk;     /* m3idx_index_topk_*, with a scores output */
  float *fused_scores;
  int32_t *fused_topk_bare; /* m3idx_index_topk_*, scores NULL */
};

/* Run every stage on ctx; 0 on success, else why (status, message, seed). */
int results_from_library(m3idx_context *ctx, const struct test_case *tc,
                         struct case_results *out, char *why, size_t n);
void results_from_oracle(const struct test_case *tc, struct case_results *out);
/* memcmp of every causal score and every top-k slot; 0 when equal. */
int results_compare(const struct test_case *tc, const struct case_results *a,
                    const struct case_results *b, char *why, size_t n);
void results_free(struct case_results *r);

#endif
