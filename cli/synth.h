/*
 * synth.h - seeded synthetic batches for the default job and the bench.
 *
 * Two styles share one layout.  SYNTH_MODEL_LIKE (the default job) encodes
 * roughly normal keys with the library's own encoder into shuffled pages
 * and draws roughly normal bf16 queries.  SYNTH_RANDOM_BYTES (the bench)
 * fills pages with random nibbles and scales 2^-7..2^7, which is quick to
 * make at gigabytes, and scatters the block tables.  SYNTH_HOSTILE_BYTES
 * is the same with every scale byte random too (0 .. 255, NaN included):
 * most keys' scales spread past what fp64 sums allow.  SYNTH_WIDE_ROWS is
 * SYNTH_RANDOM_BYTES with one (row, head) pair in 20 given an element of
 * 2^-100, so that its exponents span past what fp64 sums allow and its
 * candidate keys take the exact path.  SYNTH_SCORES makes
 * block scores to rank (with ties) and no pages.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_CLI_SYNTH_H
#define M3IDX_CLI_SYNTH_H

#include <stddef.h>

#include "m3idx.h"

/* The 128-token blocks of len tokens (SPEC section 5), in 64 bits. */
static inline int64_t synth_blocks_of(int64_t len) { return (len + 127) / 128; }

enum synth_style {
  SYNTH_MODEL_LIKE,
  SYNTH_RANDOM_BYTES,
  SYNTH_HOSTILE_BYTES,
  SYNTH_SCORES,
  SYNTH_WIDE_ROWS
};

struct synth_spec {
  enum synth_style style;
  uint64_t seed;
  int32_t num_reqs;
  const int32_t *seq_lens;   /* [num_reqs] */
  int32_t num_heads;
  int32_t query_len;         /* decode rows per request (0: none) */
  int32_t prefill_chunk;     /* prefill rows per request: its last min(chunk, seq_len) tokens */
};

struct synth {
  int32_t num_reqs, num_heads;
  int32_t *seq_lens;          /* [num_reqs] */
  int32_t max_seq_len;
  uint8_t *pages;             /* [num_pages, 8704] */
  int32_t num_pages;
  int32_t *block_table;       /* [num_reqs, bt_stride] */
  int32_t bt_stride;
  int32_t query_len;
  uint16_t *decode_query;     /* bf16 [num_reqs * query_len, H, 128] */
  int32_t *cu_seqlens_q, *context_lens;
  int32_t prefill_rows;
  uint16_t *prefill_query;    /* bf16 [prefill_rows, H, 128] */
  float *scores;              /* SYNTH_SCORES: [H, num_reqs * query_len, width] */
};

/* 0, or -1 when memory runs out (s is then empty). */
int synth_make(struct synth *s, const struct synth_spec *spec);
void synth_free(struct synth *s);

void synth_decode_batch(const struct synth *s, m3idx_batch *b);
void synth_prefill_batch(const struct synth *s, m3idx_batch *b);
void synth_kcache(const struct synth *s, m3idx_kcache *k);

uint64_t synth_rand(uint64_t *state); /* splitmix64 */
/* perm = 0 .. n - 1 in an order drawn from *state (Fisher-Yates). */
void synth_shuffle(int32_t *perm, int64_t n, uint64_t *state);
uint64_t synth_mix(uint64_t z);       /* a 64-bit hash */

/* A large buffer, allocated as serving engines allocate their caches. */
void *synth_alloc_cache(size_t bytes);

#endif
