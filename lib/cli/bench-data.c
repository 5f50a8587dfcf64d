/*
 * bench-data.c - synthetic data for the benchmark: random page bytes with
 * scales around 2^0 (every page distinct, so every byte comes from
 * memory), shuffled block tables, bf16 queries; plus timing helpers.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "bench.h"
#include "synth.h"

void *bench_alloc_cache(size_t bytes) {
  /* One large buffer on transparent huge pages where the kernel offers
     them (madvise mode), as serving engines allocate their caches. */
  size_t huge = (size_t)2 << 20;
  size_t n = (bytes + huge - 1) / huge * huge;
  void *p = NULL;
  if (posix_memalign(&p, huge, n) != 0)
    return NULL;
#ifdef MADV_HUGEPAGE
  (void)madvise(p, n, MADV_HUGEPAGE);
#endif
  return p;
}

int bench_data_make(struct bench_data *d, int32_t num_reqs, const int32_t *seq_lens,
                    int32_t max_rows, int32_t max_heads, uint64_t seed) {
  memset(d, 0, sizeof *d);
  d->num_reqs = num_reqs;
  d->max_rows = max_rows;
  d->max_heads = max_heads;
  int64_t pages = 0;
  d->max_seq_len = 1;
  for (int32_t r = 0; r < num_reqs; r++) {
    int32_t b = (seq_lens[r] + 127) / 128;
    pages += b;
    if (b > d->bt_stride)
      d->bt_stride = b;
    if (seq_lens[r] > d->max_seq_len)
      d->max_seq_len = seq_lens[r];
  }
  d->num_pages = (int32_t)pages;
  d->seq_lens = malloc(sizeof(int32_t) * (size_t)num_reqs);
  d->cu_seqlens_q = malloc(sizeof(int32_t) * (size_t)(num_reqs + 1));
  d->context_lens = malloc(sizeof(int32_t) * (size_t)num_reqs);
  d->block_table = malloc(sizeof(int32_t) * (size_t)num_reqs * (size_t)d->bt_stride);
  d->pages = bench_alloc_cache((size_t)pages * M3IDX_PAGE_BYTES + 64);
  d->query = malloc(sizeof(uint16_t) * (size_t)max_rows * (size_t)max_heads * 128 + 64);
  if (!d->seq_lens || !d->cu_seqlens_q || !d->context_lens || !d->block_table || !d->pages ||
      !d->query) {
    bench_data_free(d);
    return -1;
  }
  memcpy(d->seq_lens, seq_lens, sizeof(int32_t) * (size_t)num_reqs);
  /* Pages: random nibbles, scales 2^-7 .. 2^7. */
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < pages; p++) {
    uint64_t *w = (uint64_t *)(d->pages + p * M3IDX_PAGE_BYTES);
    for (int i = 0; i < 8192 / 8; i++)
      w[i] = synth_mix(seed ^ (uint64_t)(p * 1088 + i));
    uint8_t *sc = d->pages + p * M3IDX_PAGE_BYTES + 8192;
    for (int i = 0; i < 512; i++)
      sc[i] = (uint8_t)(120 + synth_mix(seed + (uint64_t)(p * 1088 + 1024 + i)) % 15);
  }
  /* Block tables: a stride permutation of the pages (distinct, scattered). */
  int64_t next = 0;
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
  for (int32_t r = 0; r < num_reqs; r++) {
    int32_t b = (seq_lens[r] + 127) / 128;
    for (int32_t i = 0; i < d->bt_stride; i++)
      d->block_table[(int64_t)r * d->bt_stride + i] =
          i < b ? (int32_t)(((next++) * step) % pages) : -1;
  }
  for (size_t i = 0; i < (size_t)max_rows * (size_t)max_heads * 128; i++) {
    uint64_t z = synth_mix(seed * 31 + i);
    float v = ((float)(z % 2001) - 1000.0f) / 400.0f;
    d->query[i] = m3idx_float_to_bf16(v);
  }
  return 0;
}

void bench_data_free(struct bench_data *d) {
  free(d->seq_lens);
  free(d->cu_seqlens_q);
  free(d->context_lens);
  free(d->block_table);
  free(d->pages);
  free(d->query);
  free(d->scores);
  memset(d, 0, sizeof *d);
}
