/*
 * synth.c - seeded synthetic batches (see synth.h).
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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

void *synth_alloc_cache(size_t bytes) {
  /* One large buffer on transparent huge pages where the kernel offers
     them (madvise mode), as serving engines allocate their caches. */
  size_t huge = (size_t)2 << 20;
  size_t n = (bytes + huge - 1) / huge * huge;
  void *p = NULL;
  if (posix_memalign(&p, huge, n ? n : huge) != 0)
    return NULL;
#ifdef MADV_HUGEPAGE
  (void)madvise(p, n, MADV_HUGEPAGE);
#endif
  return p;
}

/* Roughly normal: the sum of four uniforms, centred. */
static float gauss(uint64_t *s) {
  uint64_t r = synth_rand(s);
  float x = 0.0f;
  for (int i = 0; i < 4; i++)
    x += (float)((r >> (16 * i)) & 0xffff) / 65536.0f;
  return (x - 2.0f) * 1.7f;
}

/* Model-like: keys of noise plus a lift on some blocks (so that they stand
   out), encoded into pages handed out in shuffled order, as a paged cache
   hands them out; then normal queries, decode rows first. */
static int fill_model_like(struct synth *s, uint64_t seed) {
  uint64_t rs = seed;
  int32_t *perm = malloc(sizeof(int32_t) * (size_t)(s->num_pages + 1));
  float *keys = malloc(sizeof(float) * M3IDX_BLOCK_SIZE * M3IDX_HEAD_DIM);
  if (!perm || !keys) {
    free(perm);
    free(keys);
    return -1;
  }
  synth_shuffle(perm, s->num_pages, &rs);
  int64_t next = 0;
  for (int32_t r = 0; r < s->num_reqs; r++) {
    int32_t blocks = (int32_t)synth_blocks_of(s->seq_lens[r]);
    for (int32_t b = 0; b < s->bt_stride; b++)
      s->block_table[(int64_t)r * s->bt_stride + b] = b < blocks ? perm[next++] : -1;
    for (int32_t b = 0; b < blocks; b++) {
      float lift = (synth_rand(&rs) % 16 == 0) ? 2.0f : 0.0f;
      int32_t n = s->seq_lens[r] - b * 128 < 128 ? s->seq_lens[r] - b * 128 : 128;
      for (int32_t t = 0; t < 128 * 128; t++)
        keys[t] = t < n * 128 ? gauss(&rs) + lift * (float)((t & 1) ? 1 : -1) : 0.0f;
      int64_t page = s->block_table[(int64_t)r * s->bt_stride + b];
      m3idx_encode_keys_f32(keys, n, s->pages + page * M3IDX_PAGE_BYTES, 1);
    }
  }
  free(perm);
  free(keys);
  size_t nd = (size_t)s->num_reqs * (size_t)s->query_len * (size_t)s->num_heads * 128;
  size_t np = (size_t)s->prefill_rows * (size_t)s->num_heads * 128;
  for (size_t i = 0; i < nd; i++)
    s->decode_query[i] = m3idx_float_to_bf16(gauss(&rs));
  for (size_t i = 0; i < np; i++)
    s->prefill_query[i] = m3idx_float_to_bf16(gauss(&rs));
  return 0;
}

static void random_query(uint16_t *q, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++) {
    uint64_t z = synth_mix(seed * 31 + i);
    q[i] = m3idx_float_to_bf16(((float)(z % 2001) - 1000.0f) / 400.0f);
  }
}

/* One query row (128 elements) in 20 gets its element 7 as +-2^-100
   (bf16 0x0d80): its exponents then span more than 41 bits. */
static void widen_rows(uint16_t *q, size_t rows, uint64_t seed) {
  for (size_t r = 0; r < rows; r++) {
    const uint64_t z = synth_mix(seed * 131 + r);
    if (z % 20 == 0)
      q[r * M3IDX_HEAD_DIM + 7] = (uint16_t)(0x0d80u | ((z >> 8) & 1u) << 15);
  }
}

/* Random bytes: every page distinct, so every byte comes from memory;
   block tables a stride permutation of the pages (distinct, scattered).
   Scale bytes 120 .. 134, or any byte for hostile pages. */
static void fill_random_bytes(struct synth *s, uint64_t seed, int hostile) {
  int64_t pages = s->num_pages;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < pages; p++) {
    uint64_t *w = (uint64_t *)(s->pages + p * M3IDX_PAGE_BYTES);
    for (int i = 0; i < 8192 / 8; i++)
      w[i] = synth_mix(seed ^ (uint64_t)(p * 1088 + i));
    uint8_t *sc = s->pages + p * M3IDX_PAGE_BYTES + 8192;
    for (int i = 0; i < 512; i++) {
      uint64_t z = synth_mix(seed + (uint64_t)(p * 1088 + 1024 + i));
      sc[i] = (uint8_t)(hostile ? z & 255u : 120 + z % 15);
    }
  }
  int64_t step = 7919; /* coprime with pages: (i * step) % pages is a permutation */
  for (;;) {
    int64_t a = step, b = pages > 0 ? pages : 1;
    while (b) {
      int64_t t = a % b;
      a = b;
      b = t;
    }
    if (a == 1)
      break;
    step += 2;
  }
  int64_t next = 0;
  for (int32_t r = 0; r < s->num_reqs; r++) {
    int32_t b = (int32_t)synth_blocks_of(s->seq_lens[r]);
    for (int32_t i = 0; i < s->bt_stride; i++)
      s->block_table[(int64_t)r * s->bt_stride + i] =
          i < b ? (int32_t)(((next++) * step) % pages) : -1;
  }
  random_query(s->decode_query,
               (size_t)s->num_reqs * (size_t)s->query_len * (size_t)s->num_heads * 128, seed);
  random_query(s->prefill_query, (size_t)s->prefill_rows * (size_t)s->num_heads * 128, seed);
}

/* Scores to rank: xorshift draws of 100000 values, so ties are common. */
static void fill_scores(float *scores, size_t n, uint64_t seed) {
  uint64_t z = seed;
  for (size_t i = 0; i < n; i++) {
    z ^= z << 13;
    z ^= z >> 7;
    z ^= z << 17;
    scores[i] = (float)(z % 100000) / 1000.0f;
  }
}

int synth_make(struct synth *s, const struct synth_spec *spec) {
  memset(s, 0, sizeof *s);
  s->num_reqs = spec->num_reqs;
  s->num_heads = spec->num_heads;
  s->query_len = spec->query_len;
  s->seq_lens = malloc(sizeof(int32_t) * (size_t)spec->num_reqs);
  s->cu_seqlens_q = malloc(sizeof(int32_t) * (size_t)(spec->num_reqs + 1));
  s->context_lens = malloc(sizeof(int32_t) * (size_t)spec->num_reqs);
  if (!s->seq_lens || !s->cu_seqlens_q || !s->context_lens) {
    synth_free(s);
    return -1;
  }
  int64_t pages = 0;
  s->max_seq_len = 1;
  s->cu_seqlens_q[0] = 0;
  for (int32_t r = 0; r < spec->num_reqs; r++) {
    int32_t len = spec->seq_lens[r], blocks = (int32_t)synth_blocks_of(len);
    int32_t rows = spec->prefill_chunk < len ? spec->prefill_chunk : len;
    s->seq_lens[r] = len;
    s->max_seq_len = len > s->max_seq_len ? len : s->max_seq_len;
    s->bt_stride = blocks > s->bt_stride ? blocks : s->bt_stride;
    pages += blocks;
    s->context_lens[r] = len - rows;
    s->cu_seqlens_q[r + 1] = s->cu_seqlens_q[r] + rows;
  }
  s->prefill_rows = s->cu_seqlens_q[spec->num_reqs];
  if (spec->style == SYNTH_SCORES) {
    size_t n = (size_t)spec->num_heads * (size_t)spec->num_reqs * (size_t)spec->query_len *
               (size_t)synth_blocks_of(s->max_seq_len);
    s->scores = malloc(sizeof(float) * n + 1);
    if (!s->scores) {
      synth_free(s);
      return -1;
    }
    fill_scores(s->scores, n, spec->seed);
    return 0;
  }
  s->num_pages = (int32_t)pages;
  s->pages = synth_alloc_cache((size_t)pages * M3IDX_PAGE_BYTES + 64);
  s->block_table = malloc(sizeof(int32_t) * (size_t)spec->num_reqs * (size_t)s->bt_stride + 1);
  s->decode_query = malloc(sizeof(uint16_t) * (size_t)spec->num_reqs * (size_t)spec->query_len *
                           (size_t)spec->num_heads * M3IDX_HEAD_DIM + 64);
  s->prefill_query = malloc(sizeof(uint16_t) * (size_t)s->prefill_rows *
                            (size_t)spec->num_heads * M3IDX_HEAD_DIM + 64);
  if (!s->pages || !s->block_table || !s->decode_query || !s->prefill_query) {
    synth_free(s);
    return -1;
  }
  if (spec->style == SYNTH_RANDOM_BYTES || spec->style == SYNTH_HOSTILE_BYTES ||
      spec->style == SYNTH_WIDE_ROWS) {
    fill_random_bytes(s, spec->seed, spec->style == SYNTH_HOSTILE_BYTES);
    if (spec->style == SYNTH_WIDE_ROWS) {
      widen_rows(s->decode_query,
                 (size_t)spec->num_reqs * (size_t)spec->query_len * (size_t)spec->num_heads,
                 spec->seed);
      widen_rows(s->prefill_query, (size_t)s->prefill_rows * (size_t)spec->num_heads,
                 spec->seed);
    }
  } else if (fill_model_like(s, spec->seed) != 0) {
    synth_free(s);
    return -1;
  }
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
  free(s->scores);
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
