/*
 * patterns.h - the call patterns every backend is checked on: decode
 * query_len 1..4, prefill with and without context, block edges, forced
 * blocks, special values, ties, long rows, large batches.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_TEST_PATTERNS_H
#define M3IDX_TEST_PATTERNS_H

#include "cases.h"

/* Called with each case of a pattern; takes ownership of tc. */
typedef void (*case_sink)(struct test_case *tc, void *arg);

struct pattern {
  const char *name;
  int variants;  /* the pattern is run for variant 0 .. variants-1 */
  int gpu_only;  /* too long for the scalar oracle (up to 1M tokens) */
  void (*make)(int variant, case_sink each, void *arg);
};

extern const struct pattern m3idx_patterns[];
extern const int m3idx_npatterns;

/* All (pattern, variant) pairs, numbered 0 .. patterns_total()-1. */
int patterns_total(void);
/* Make the cases of pair `index' (skipping gpu_only patterns unless
 * with_gpu_only). */
void patterns_run(int index, int with_gpu_only, case_sink each, void *arg);

#endif
