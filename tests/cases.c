/*
 * cases.c - seeded random calls for the tests (see cases.h).
 *
 * SPDX-License-Identifier: MIT
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"

#define GUARD 64

uint64_t case_rand(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint16_t bf16_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}

static void fill_query(struct test_case *tc, uint64_t *rs, size_t n) {
  if (tc->query.dtype == M3IDX_DTYPE_BF16) {
    uint16_t *q = tc->query_data;
    for (size_t i = 0; i < n; i++) {
      uint64_t r = case_rand(rs);
      float v;
      if (tc->flavor == FLAVOR_TIES)
        v = (float)((int)(r % 5) - 2);
      else
        v = ldexpf((float)((int64_t)(r % 2001) - 1000) / 1000.0f, (int)((r >> 20) % 9) - 4);
      q[i] = bf16_bits(v);
      if (tc->flavor == FLAVOR_SPECIAL) {
        uint64_t k = (r >> 40) % 4096;
        if (k == 0)
          q[i] = 0x7fc0;               /* NaN */
        else if (k == 1)
          q[i] = 0x7f80;               /* +inf */
        else if (k == 2)
          q[i] = 0xff80;               /* -inf */
        else if (k < 40)
          q[i] = (uint16_t)(r & 0x807f); /* subnormal */
        else if (k < 60)
          q[i] = (uint16_t)(0x7f00 | (r & 0x807f)); /* huge */
      }
    }
  } else {
    uint8_t *q = tc->query_data;
    for (size_t i = 0; i < n; i++) {
      uint64_t r = case_rand(rs);
      uint8_t b = (uint8_t)r;
      if (tc->flavor == FLAVOR_TIES)
        b = (uint8_t)((r % 3) * 0x38); /* 0, 1.0, 16.0 */
      else if (tc->flavor != FLAVOR_SPECIAL && (b & 0x7f) == 0x7f)
        b ^= 1;                          /* no NaN unless special */
      q[i] = b;
    }
  }
}

static void fill_pages(struct test_case *tc, uint64_t *rs, int num_pages) {
  for (int p = 0; p < num_pages; p++) {
    uint8_t *pg = tc->pages + (size_t)p * M3IDX_PAGE_BYTES;
    for (int i = 0; i < 8192; i++) {
      uint64_t r = case_rand(rs);
      pg[i] = tc->flavor == FLAVOR_TIES ? (uint8_t)((r & 1 ? 0x02 : 0x00) | (r & 2 ? 0x40 : 0x00))
                                        : (uint8_t)r;
    }
    for (int i = 0; i < 512; i++) {
      uint64_t r = case_rand(rs);
      uint8_t e = (uint8_t)(120 + r % 15);
      if (tc->flavor == FLAVOR_TIES)
        e = 127;
      if (tc->flavor == FLAVOR_SPECIAL) {
        uint64_t k = (r >> 16) % 64;
        if (k == 0)
          e = 0;
        else if (k == 1)
          e = 254;
        else if (k == 2)
          e = 255;
        else if (k == 3)
          e = (uint8_t)(r >> 32);
      }
      pg[8192 + i] = e;
    }
  }
}

/* Pages for every block, shuffled, garbage past each request's blocks. */
static void fill_kcache(struct test_case *tc, uint64_t *rs) {
  int n = tc->batch.num_reqs, total = 0, stride = 1;
  for (int r = 0; r < n; r++) {
    int b = (tc->seq_lens[r] + 127) / 128;
    total += b;
    if (b + 3 > stride)
      stride = b + 3;
  }
  int num_pages = total + 2;
  int *perm = malloc(sizeof *perm * (size_t)num_pages);
  for (int i = 0; i < num_pages; i++)
    perm[i] = i;
  for (int i = num_pages - 1; i > 0; i--) {
    int j = (int)(case_rand(rs) % (uint64_t)(i + 1)), t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  tc->block_table = malloc(sizeof(int32_t) * (size_t)n * (size_t)stride);
  int next = 0;
  for (int r = 0; r < n; r++) {
    int b = (tc->seq_lens[r] + 127) / 128;
    for (int i = 0; i < stride; i++) {
      int32_t garbage[4] = {-1, num_pages, INT32_MIN, (int32_t)case_rand(rs)};
      tc->block_table[r * stride + i] = i < b ? perm[next++] : garbage[i % 4];
    }
  }
  free(perm);
  tc->pages = malloc((size_t)num_pages * M3IDX_PAGE_BYTES);
  fill_pages(tc, rs, num_pages);
  tc->kcache = (m3idx_kcache){tc->pages, num_pages, tc->block_table, stride};
}

static void finish(struct test_case *tc, uint64_t *rs) {
  m3idx_batch *b = &tc->batch;
  int max = 1;
  for (int r = 0; r < b->num_reqs; r++)
    if (tc->seq_lens[r] > max)
      max = tc->seq_lens[r];
  b->max_seq_len = max + (int)(case_rand(rs) % 300);
  b->seq_lens = tc->seq_lens;
  fill_kcache(tc, rs);
  size_t n = (size_t)b->num_rows * b->num_heads * 128;
  tc->query_data = malloc(n * (tc->query.dtype == M3IDX_DTYPE_BF16 ? 2 : 1) + 1);
  fill_query(tc, rs, n);
  tc->query.data = tc->query_data;
  tc->query.scale = tc->flavor == FLAVOR_TIES ? 1.0f : 0.0883883f;
  tc->oc = (struct oracle_call){
      .mode = b->mode, .num_reqs = b->num_reqs, .num_heads = b->num_heads,
      .num_rows = b->num_rows, .max_seq_len = b->max_seq_len,
      .query_len = b->query_len, .seq_lens = tc->seq_lens,
      .cu_seqlens_q = tc->cu_seqlens_q, .context_lens = tc->context_lens,
      .query = tc->query_data, .dtype = tc->query.dtype,
      .scale = tc->query.scale, .pages = tc->pages,
      .block_table = tc->block_table, .bt_stride = tc->kcache.bt_stride};
  case_set_forced(tc, 0, 1);
}

void case_set_scale(struct test_case *tc, float scale) {
  tc->query.scale = scale;
  tc->oc.scale = scale;
}

struct test_case *case_decode(uint64_t seed, int flavor, int num_heads,
                              int query_len, m3idx_dtype dtype, int num_reqs,
                              const int32_t *seq_lens) {
  struct test_case *tc = calloc(1, sizeof *tc);
  uint64_t rs = seed;
  tc->seed = seed;
  tc->flavor = flavor;
  tc->seq_lens = malloc(sizeof(int32_t) * (size_t)num_reqs);
  memcpy(tc->seq_lens, seq_lens, sizeof(int32_t) * (size_t)num_reqs);
  tc->batch = (m3idx_batch){.mode = M3IDX_MODE_DECODE, .num_reqs = num_reqs,
                            .num_heads = num_heads,
                            .num_rows = num_reqs * query_len,
                            .query_len = query_len};
  tc->query.dtype = dtype;
  finish(tc, &rs);
  return tc;
}

struct test_case *case_prefill(uint64_t seed, int flavor, int num_heads,
                               m3idx_dtype dtype, int num_reqs,
                               const int32_t *context_lens,
                               const int32_t *q_lens) {
  struct test_case *tc = calloc(1, sizeof *tc);
  uint64_t rs = seed;
  tc->seed = seed;
  tc->flavor = flavor;
  tc->seq_lens = malloc(sizeof(int32_t) * (size_t)num_reqs);
  tc->context_lens = malloc(sizeof(int32_t) * (size_t)num_reqs);
  tc->cu_seqlens_q = malloc(sizeof(int32_t) * (size_t)(num_reqs + 1));
  tc->cu_seqlens_q[0] = 0;
  for (int r = 0; r < num_reqs; r++) {
    tc->context_lens[r] = context_lens[r];
    tc->seq_lens[r] = context_lens[r] + q_lens[r];
    tc->cu_seqlens_q[r + 1] = tc->cu_seqlens_q[r] + q_lens[r];
  }
  tc->batch = (m3idx_batch){.mode = M3IDX_MODE_PREFILL, .num_reqs = num_reqs,
                            .num_heads = num_heads,
                            .num_rows = tc->cu_seqlens_q[num_reqs],
                            .cu_seqlens_q = tc->cu_seqlens_q,
                            .context_lens = tc->context_lens};
  tc->query.dtype = dtype;
  finish(tc, &rs);
  return tc;
}

void case_set_forced(struct test_case *tc, int init_blocks, int local_blocks) {
  tc->init_blocks = init_blocks;
  tc->local_blocks = local_blocks;
  tc->oc.init_blocks = init_blocks;
  tc->oc.local_blocks = local_blocks;
}

void case_free(struct test_case *tc) {
  if (!tc)
    return;
  free(tc->seq_lens);
  free(tc->cu_seqlens_q);
  free(tc->context_lens);
  free(tc->block_table);
  free(tc->query_data);
  free(tc->pages);
  free(tc);
}

void case_options(const struct test_case *tc, m3idx_options *o) {
  m3idx_options_init(o);
  o->max_reqs = tc->batch.num_reqs;
  o->max_model_len = tc->batch.max_seq_len;
  o->max_rows = tc->batch.num_rows > 0 ? tc->batch.num_rows : 1;
  o->max_heads = tc->batch.num_heads;
  o->flags = M3IDX_FLAG_HOST_POINTERS;
}

void guarded_alloc(struct guarded *g, size_t bytes, unsigned char fill) {
  g->bytes = bytes;
  g->raw = malloc(bytes + 2 * GUARD);
  memset(g->raw, fill, bytes + 2 * GUARD);
  g->data = g->raw + GUARD;
}

int guarded_intact(const struct guarded *g, unsigned char fill, int whole) {
  size_t n = g->bytes + 2 * GUARD;
  for (size_t i = 0; i < n; i++) {
    int in_data = i >= GUARD && i < GUARD + g->bytes;
    if ((whole || !in_data) && g->raw[i] != fill)
      return 0;
  }
  return 1;
}

void guarded_free(struct guarded *g) {
  free(g->raw);
  g->raw = NULL;
  g->data = NULL;
}
