/*
 * ceilings-cpu.c - the CPU's own ceilings, measured in the bench's run:
 * a STREAM-style read of a buffer larger than the last-level cache, the
 * same read taken as 8704-byte pages in shuffled order, each prefetched
 * into L2 ahead of its read as decode prefetches it (page-prefetch.h: what
 * decode reads, as it reads them: a block table's pages lie anywhere), and a
 * register-resident fp32 FMA loop on every thread.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "bench.h"
#include "cli.h"
#include "cpu-features.h"
#include "page-prefetch.h"
#include "synth.h"

#ifdef M3IDX_CPU_X86_64
__attribute__((target("avx512f"))) static uint64_t read_avx512(const uint8_t *p, size_t n) {
  __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
  size_t i = 0;
  for (; i + 256 <= n; i += 256) {
    a = _mm512_add_epi64(a, _mm512_load_si512((const void *)(p + i)));
    b = _mm512_add_epi64(b, _mm512_load_si512((const void *)(p + i + 64)));
    c = _mm512_add_epi64(c, _mm512_load_si512((const void *)(p + i + 128)));
    d = _mm512_add_epi64(d, _mm512_load_si512((const void *)(p + i + 192)));
  }
  for (; i + 64 <= n; i += 64) /* a part of a page: 1088 = 4 x 256 + 64 */
    a = _mm512_add_epi64(a, _mm512_load_si512((const void *)(p + i)));
  a = _mm512_add_epi64(_mm512_add_epi64(a, b), _mm512_add_epi64(c, d));
  return (uint64_t)_mm512_reduce_add_epi64(a);
}
#endif

static uint64_t read_plain(const uint8_t *p, size_t n) {
  const uint64_t *w = (const uint64_t *)p;
  uint64_t a = 0, b = 0, c = 0, d = 0;
  for (size_t i = 0; i + 4 <= n / 8; i += 4) {
    a += w[i];
    b += w[i + 1];
    c += w[i + 2];
    d += w[i + 3];
  }
  return a + b + c + d;
}

volatile uint64_t bench_sink;

static uint64_t read_span(const uint8_t *p, size_t n, int simd) {
#ifdef M3IDX_CPU_X86_64
  if (simd)
    return read_avx512(p, n);
#endif
  (void)simd;
  return read_plain(p, n);
}

/* Bytes per second of reading `spans' spans of `bytes' bytes (multiples
 * of 256; with an order, pages, read in shares as decode reads them), span
 * order[i] (or i) the i-th, shared among the threads: the median of
 * `repeats' reads after one warm-up. */
static double timed_read(const uint8_t *buf, const int32_t *order, int64_t spans, size_t bytes,
                         int threads, int repeats) {
  double *times = malloc(sizeof(double) * (size_t)repeats);
  if (times == NULL)
    return 0.0;
  int simd = m3idx__cpu_has_avx512f();
  for (int r = 0; r <= repeats; r++) {
    double t0 = cli_now();
    uint64_t total = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(+ : total)
    for (int64_t i = 0; i < spans; i++) {
      const uint8_t *span = buf + (size_t)(order ? order[i] : i) * bytes;
      if (order == NULL) {
        total += read_span(span, bytes, simd);
        continue;
      }
      /* As decode reads a page (page-prefetch.h): in shares, each share
       * of the page M3IDX_CPU_PREFETCH_PAGES on prefetched as the same
       * share of this one is read. */
      const int64_t on = i + M3IDX_CPU_PREFETCH_PAGES;
      const uint8_t *ahead = on < spans ? buf + (size_t)order[on] * bytes : NULL;
      const size_t share = bytes / M3IDX_CPU_PREFETCH_SHARES;
      for (int part = 0; part < M3IDX_CPU_PREFETCH_SHARES; part++) {
        if (ahead != NULL)
          m3idx__cpu_prefetch_share(ahead, part);
        total += read_span(span + (size_t)part * share, share, simd);
      }
    }
    bench_sink += total;
    if (r > 0)
      times[r - 1] = cli_now() - t0;
  }
  double med = cli_median(times, repeats);
  free(times);
  return (double)spans * (double)bytes / med;
}

double bench_cpu_read_bandwidth(int threads, size_t bytes, int repeats) {
  uint8_t *buf = synth_alloc_cache(bytes); /* as the page cache is allocated */
  if (buf == NULL)
    return 0.0;
  size_t chunk = bytes / (size_t)(threads > 0 ? threads : 1) / 256 * 256;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < threads; t++)
    memset(buf + (size_t)t * chunk, t + 1, chunk); /* first touch by the reader */
  double bps = timed_read(buf, NULL, threads, chunk, threads, repeats);
  free(buf);
  return bps;
}

double bench_cpu_page_read_bandwidth(int threads, size_t bytes, int repeats) {
  const int32_t pages = (int32_t)(bytes / M3IDX_PAGE_BYTES); /* 8704 = 34 x 256 */
  uint8_t *buf = synth_alloc_cache((size_t)pages * M3IDX_PAGE_BYTES);
  int32_t *order = malloc(sizeof(int32_t) * (size_t)pages);
  if (buf == NULL || order == NULL) {
    free(buf);
    free(order);
    return 0.0;
  }
  uint64_t state = 1; /* a fixed shuffle */
  synth_shuffle(order, pages, &state);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int32_t i = 0; i < pages; i++) /* first touch by the reader */
    memset(buf + (size_t)order[i] * M3IDX_PAGE_BYTES, i & 0xff, M3IDX_PAGE_BYTES);
  double bps = timed_read(buf, order, pages, M3IDX_PAGE_BYTES, threads, repeats);
  free(order);
  free(buf);
  return bps;
}

#define CHAINS 16
#define ITERS 20000000

#ifdef M3IDX_CPU_X86_64
__attribute__((target("avx512f"))) static float fma_avx512(float seed) {
  __m512 v[CHAINS];
  const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
  for (int i = 0; i < CHAINS; i++)
    v[i] = _mm512_set1_ps(seed + (float)i);
  for (long it = 0; it < ITERS; it++)
    _Pragma("GCC unroll 16") for (int i = 0; i < CHAINS; i++) /* registers, not memory */
      v[i] = _mm512_fmadd_ps(v[i], m, a);
  __m512 s = v[0];
  for (int i = 1; i < CHAINS; i++)
    s = _mm512_add_ps(s, v[i]);
  return _mm512_reduce_add_ps(s);
}
#endif

static float fma_plain(float seed) {
  float v[CHAINS];
  for (int i = 0; i < CHAINS; i++)
    v[i] = seed + (float)i;
  for (long it = 0; it < ITERS / 4; it++)
    _Pragma("GCC unroll 16") for (int i = 0; i < CHAINS; i++)
      v[i] = v[i] * 0.999999f + 1e-7f;
  float s = 0.0f;
  for (int i = 0; i < CHAINS; i++)
    s += v[i];
  return s;
}

double bench_cpu_fma_peak(int threads) {
  int simd = m3idx__cpu_has_avx512f();
  double times[3];
  for (int r = 0; r < 4; r++) {
    double t0 = cli_now();
    float total = 0.0f;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(+ : total)
    for (int t = 0; t < threads; t++) {
#ifdef M3IDX_CPU_X86_64
      total += simd ? fma_avx512((float)t) : fma_plain((float)t);
#else
      total += fma_plain((float)t);
#endif
    }
    bench_sink += (uint64_t)total;
    if (r > 0)
      times[r - 1] = cli_now() - t0;
  }
  double lanes = simd ? 16.0 : 1.0, iters = simd ? ITERS : ITERS / 4;
  return 2.0 * CHAINS * lanes * iters * threads / cli_median(times, 3);
}
