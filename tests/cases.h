/*
 * cases.h - seeded random calls for the tests: pages, block tables with
 * garbage past each request's blocks, queries, and the oracle's view.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_TEST_CASES_H
#define M3IDX_TEST_CASES_H

#include <stdint.h>

#include "m3idx.h"
#include "oracle.h"

/* What the random data looks like. */
enum case_flavor {
  FLAVOR_PLAIN = 0,   /* random nibbles, moderate scales, finite queries */
  FLAVOR_SPECIAL = 1, /* scale bytes 0, 254, 255; NaN, inf, subnormal queries */
  FLAVOR_TIES = 2     /* few distinct values: many equal block scores */
};

struct test_case {
  uint64_t seed;
  int flavor;
  m3idx_batch batch;
  m3idx_query query;
  m3idx_kcache kcache;
  int32_t init_blocks, local_blocks;
  struct oracle_call oc;
  /* storage */
  int32_t *seq_lens, *cu_seqlens_q, *context_lens, *block_table;
  void *query_data;
  uint8_t *pages;
};

uint64_t case_rand(uint64_t *state);

/* Decode: num_reqs requests with the given seq_lens (each >= query_len). */
struct test_case *case_decode(uint64_t seed, int flavor, int num_heads,
                              int query_len, m3idx_dtype dtype, int num_reqs,
                              const int32_t *seq_lens);
/* Prefill: request r has context_lens[r] tokens, then q_lens[r] rows. */
struct test_case *case_prefill(uint64_t seed, int flavor, int num_heads,
                               m3idx_dtype dtype, int num_reqs,
                               const int32_t *context_lens,
                               const int32_t *q_lens);
void case_set_forced(struct test_case *tc, int init_blocks, int local_blocks);
/* The call's logit scale (0.0883883, 1 for FLAVOR_TIES, unless set). */
void case_set_scale(struct test_case *tc, float scale);
void case_free(struct test_case *tc);

/* Options large enough for the case. */
void case_options(const struct test_case *tc, m3idx_options *opts);

/* A float buffer with guard bytes on both sides, filled with a pattern. */
struct guarded {
  unsigned char *raw;
  void *data;
  size_t bytes;
};
void guarded_alloc(struct guarded *g, size_t bytes, unsigned char fill);
/* 1 when the guards (and, with whole, the data too) still hold the fill. */
int guarded_intact(const struct guarded *g, unsigned char fill, int whole);
void guarded_free(struct guarded *g);

#endif
