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

#endif
