/*
 * synth.h - seeded synthetic batches for the default job and the bench:
 * keys encoded with the library's own encoder into shuffled pages.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_CLI_SYNTH_H
#define M3IDX_CLI_SYNTH_H

#include "m3idx.h"

struct synth {
  uint64_t seed;
  int32_t num_reqs, num_heads;
  int32_t *seq_lens;          /* [num_reqs] */
  int32_t max_seq_len;
  uint8_t *pages;             /* [num_pages, 8704] */
  int32_t num_pages;
  int32_t *block_table;       /* [num_reqs, bt_stride] */
  int32_t bt_stride;
  /* Decode rows (query_len per request) and prefill rows (the last
     prefill_rows[r] tokens of request r), bf16 [rows, H, 128]. */
  int32_t query_len;
  uint16_t *decode_query;
  int32_t *cu_seqlens_q, *context_lens;
  int32_t prefill_rows;
  uint16_t *prefill_query;
};

/* seq_lens[r] tokens per request; prefill chunks of chunk rows (<= seq). */
int synth_make(struct synth *s, uint64_t seed, int32_t num_reqs,
               const int32_t *seq_lens, int32_t num_heads, int32_t query_len,
               int32_t prefill_chunk);
void synth_free(struct synth *s);

void synth_decode_batch(const struct synth *s, m3idx_batch *b);
void synth_prefill_batch(const struct synth *s, m3idx_batch *b);
void synth_kcache(const struct synth *s, m3idx_kcache *k);

uint64_t synth_rand(uint64_t *state); /* splitmix64 */
/* perm = 0 .. n - 1 in an order drawn from *state (Fisher-Yates). */
void synth_shuffle(int32_t *perm, int64_t n, uint64_t *state);
uint64_t synth_mix(uint64_t z);       /* a 64-bit hash */

#endif
