/*
 * synth.c - seeded synthetic batches (see synth.h).
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "synth.h"

uint64_t synth_mix(uint64_t z) { /* splitmix64's finaliser */
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t synth_rand(uint64_t *s) { return synth_mix(*s += 0x9e3779b97f4a7c15ull); }

void synth_shuffle(int32_t *perm, int64_t n, uint64_t *state) {
  for (int64_t i = 0; i < n; i++)
    perm[i] = (int32_t)i;
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)(synth_rand(state) % (uint64_t)(i + 1));
    int32_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
}

/* Roughly normal: the sum of four uniforms, centred. */
static float gauss(uint64_t *s) {
  uint64_t r = synth_rand(s);
  float x = 0.0f;
  for (int i = 0; i < 4; i++)
    x += (float)((r >> (16 * i)) & 0xffff) / 65536.0f;
  return (x - 2.0f) * 1.7f;
}

static void fill_query(uint16_t *q, size_t n, uint64_t *rs) {
  for (size_t i = 0; i < n; i++)
    q[i] = m3idx_float_to_bf16(gauss(rs));
}

int synth_make(struct synth *s, uint64_t seed, int32_t num_reqs,
               const int32_t *seq_lens, int32_t num_heads, int32_t query_len,
               int32_t prefill_chunk) {
  memset(s, 0, sizeof *s);
  uint64_t rs = seed;
  s->seed = seed;
  s->num_reqs = num_reqs;
  s->num_heads = num_heads;
  s->query_len = query_len;
  s->seq_lens = malloc(sizeof(int32_t) * (size_t)num_reqs);
  s->cu_seqlens_q = malloc(sizeof(int32_t) * (size_t)(num_reqs + 1));
  s->context_lens = malloc(sizeof(int32_t) * (size_t)num_reqs);
  if (!s->seq_lens || !s->cu_seqlens_q || !s->context_lens)
    return -1;
  int64_t pages = 0;
  s->max_seq_len = 1;
  s->cu_seqlens_q[0] = 0;
  for (int32_t r = 0; r < num_reqs; r++) {
    s->seq_lens[r] = seq_lens[r];
    if (seq_lens[r] > s->max_seq_len)
      s->max_seq_len = seq_lens[r];
    int32_t blocks = (seq_lens[r] + 127) / 128;
    pages += blocks;
    if (blocks > s->bt_stride)
      s->bt_stride = blocks;
    int32_t rows = prefill_chunk < seq_lens[r] ? prefill_chunk : seq_lens[r];
    s->context_lens[r] = seq_lens[r] - rows;
    s->cu_seqlens_q[r + 1] = s->cu_seqlens_q[r] + rows;
  }
  s->prefill_rows = s->cu_seqlens_q[num_reqs];
  s->num_pages = (int32_t)pages;
  s->pages = malloc((size_t)pages * M3IDX_PAGE_BYTES + 1);
  s->block_table = malloc(sizeof(int32_t) * (size_t)num_reqs * (size_t)s->bt_stride);
  s->decode_query = malloc(sizeof(uint16_t) * (size_t)num_reqs * (size_t)query_len *
                           (size_t)num_heads * M3IDX_HEAD_DIM + 2);
  s->prefill_query = malloc(sizeof(uint16_t) * (size_t)s->prefill_rows * (size_t)num_heads *
                            M3IDX_HEAD_DIM + 2);
  int32_t *perm = malloc(sizeof(int32_t) * (size_t)(pages + 1));
  float *keys = malloc(sizeof(float) * M3IDX_BLOCK_SIZE * M3IDX_HEAD_DIM);
  if (!s->pages || !s->block_table || !s->decode_query || !s->prefill_query || !perm || !keys) {
    free(perm);
    free(keys);
    return -1;
  }
  /* Pages in shuffled order, as a paged cache hands them out. */
  synth_shuffle(perm, pages, &rs);
  int64_t next = 0;
  for (int32_t r = 0; r < num_reqs; r++) {
    int32_t blocks = (seq_lens[r] + 127) / 128;
    for (int32_t b = 0; b < s->bt_stride; b++)
      s->block_table[(int64_t)r * s->bt_stride + b] = b < blocks ? perm[next++] : -1;
    /* Keys: noise plus a per-block offset, so that some blocks stand out. */
    for (int32_t b = 0; b < blocks; b++) {
      float lift = (synth_rand(&rs) % 16 == 0) ? 2.0f : 0.0f;
      int32_t n = seq_lens[r] - b * 128 < 128 ? seq_lens[r] - b * 128 : 128;
      for (int32_t t = 0; t < 128 * 128; t++)
        keys[t] = t < n * 128 ? gauss(&rs) + lift * (float)((t & 1) ? 1 : -1) : 0.0f;
      m3idx_encode_keys_f32(keys, n, s->pages + (int64_t)s->block_table[(int64_t)r * s->bt_stride + b] *
                                              M3IDX_PAGE_BYTES, 1);
    }
  }
  free(perm);
  free(keys);
  fill_query(s->decode_query, (size_t)num_reqs * (size_t)query_len * (size_t)num_heads * 128, &rs);
  fill_query(s->prefill_query, (size_t)s->prefill_rows * (size_t)num_heads * 128, &rs);
  return 0;
}

void synth_free(struct synth *s) {
  free(s->seq_lens);
  free(s->cu_seqlens_q);
  free(s->context_lens);
  free(s->pages);
  free(s->block_table);
  free(s->decode_query);
  free(s->prefill_query);
  memset(s, 0, sizeof *s);
}

void synth_decode_batch(const struct synth *s, m3idx_batch *b) {
  *b = (m3idx_batch){.mode = M3IDX_MODE_DECODE, .num_reqs = s->num_reqs,
                     .num_heads = s->num_heads, .num_rows = s->num_reqs * s->query_len,
                     .max_seq_len = s->max_seq_len, .seq_lens = s->seq_lens,
                     .query_len = s->query_len};
}

void synth_prefill_batch(const struct synth *s, m3idx_batch *b) {
  *b = (m3idx_batch){.mode = M3IDX_MODE_PREFILL, .num_reqs = s->num_reqs,
                     .num_heads = s->num_heads, .num_rows = s->prefill_rows,
                     .max_seq_len = s->max_seq_len, .seq_lens = s->seq_lens,
                     .cu_seqlens_q = s->cu_seqlens_q, .context_lens = s->context_lens};
}

void synth_kcache(const struct synth *s, m3idx_kcache *k) {
  *k = (m3idx_kcache){s->pages, s->num_pages, s->block_table, s->bt_stride};
}
