/*
 * path-check.hip - the self-check of the fast scoring kernels.
 *
 * A target's fast kernels use instructions that nothing here can run for
 * every target (no AMD GPU is reachable where this is built), so before a
 * context uses one, a small seeded batch goes through it and through the
 * plain row of the pick table (decode with 16, 4 and one pair a request,
 * and prefill: each call goes to the fast row where it takes the call's
 * shape), and every score must match bit for bit
 * (kernel-pick.hip keeps the verdicts).
 *
 * SPDX-License-Identifier: MIT
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel-pick.h"
#include "m3idx.h"
#include "spec-rules.h"
#include "stage-plan.h"
#include "work-map.h"

/* ---- the seeded batch --------------------------------------------------- */

enum { REQS = 3, HEADS = 4, QLEN = 4, WIDTH = 8, PAGES = 15, ROWS = 26 };
static const int32_t seq_lens[REQS] = {1000, 517, 129};
static const int32_t context_lens[REQS] = {990, 510, 120};
static const int32_t cu_seqlens_q[REQS + 1] = {0, 10, 17, 26};

static uint64_t next(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Random codes, scale bytes mostly near 127 (some 0, 254 and NaN), and a
 * quarter of the keys a near copy of the one before (one code one step
 * off), so that many keys fall within the filter's bound of the best. */
static void make_pages(uint8_t *pages, uint64_t *s) {
  for (int p = 0; p < PAGES; p++) {
    uint8_t *page = pages + (size_t)p * M3IDX_PAGE_BYTES;
    for (int t = 0; t < 128; t++) {
      uint8_t *codes = page + 64 * t, *sc = page + M3IDX_PAGE_DATA_BYTES + 4 * t;
      const uint64_t r = next(s);
      if (t > 0 && (r & 3) == 0) {
        memcpy(codes, codes - 64, 64);
        memcpy(sc, sc - 4, 4);
        codes[(r >> 8) & 63] ^= (uint8_t)(1u << (4 * ((r >> 16) & 1)));
        continue;
      }
      for (int i = 0; i < 64; i += 8) {
        const uint64_t v = next(s);
        memcpy(codes + i, &v, 8);
      }
      for (int g = 0; g < 4; g++) {
        const unsigned u = (unsigned)(next(s) & 1023);
        sc[g] = (uint8_t)(u < 8 ? 0 : u < 12 ? 254 : u < 14 ? 255 : 118 + u % 16);
      }
    }
  }
}

/* bf16 elements of magnitude 2^-6 .. 2^3, a few zeros. */
static void make_query(uint16_t *q, uint64_t *s) {
  for (int i = 0; i < ROWS * HEADS * M3IDX_HEAD_DIM; i++) {
    const uint64_t r = next(s);
    q[i] = (r & 31) == 0 ? 0
                         : (uint16_t)(((r >> 5) & 1) << 15 | (121 + (r >> 6) % 10) << 7 |
                                      ((r >> 16) & 127));
  }
}

/* ---- the three calls, through a set of kernels --------------------------- */

/* The seeded batch's arrays in host memory. */
struct check_batch {
  uint8_t pages[PAGES * M3IDX_PAGE_BYTES];
  uint16_t query[ROWS * HEADS * M3IDX_HEAD_DIM];
  int32_t bt[REQS * WIDTH];
};

enum { CALLS = 4 };
static const char *const call_name[CALLS] = {"decode", "prefill", "one-pair decode",
                                             "four-pair decode"};

/* Call i of the check on batch b (NULL: its geometry alone), scores into
 * scores, a work map into map for decode: decode with QLEN rows and HEADS
 * heads a request, scale 0.625; prefill, scale -0.375 (the filter then
 * looks for the smallest D); decode with one pair a request, scale 1.5;
 * decode with one row and HEADS heads a request, scale -1.25. */
static m3idx_call check_call(int i, const check_batch *b, float *scores, int32_t *map) {
  m3idx_call c{};
  c.stage = M3IDX_STAGE_SCORE;
  c.num_reqs = REQS;
  c.num_heads = i == 2 ? 1 : HEADS;
  c.max_seq_len = WIDTH * 128;
  c.width = WIDTH;
  c.seq_lens = seq_lens;
  c.query = b ? b->query : NULL;
  c.query_dtype = M3IDX_DTYPE_BF16;
  c.pages = b ? b->pages : NULL;
  c.num_pages = PAGES;
  c.block_table = b ? b->bt : NULL;
  c.bt_stride = WIDTH;
  c.scores = scores;
  c.score_stride = WIDTH;
  if (i == 1) {
    c.mode = M3IDX_MODE_PREFILL;
    c.num_rows = ROWS;
    c.cu_seqlens_q = cu_seqlens_q;
    c.context_lens = context_lens;
    c.scale = -0.375f;
    return c;
  }
  c.mode = M3IDX_MODE_DECODE;
  c.query_len = i == 0 ? QLEN : 1;
  c.num_rows = REQS * c.query_len;
  c.scale = i == 0 ? 0.625f : i == 2 ? 1.5f : -1.25f;
  c.work_map_out = map;
  c.work_map_capacity = (int32_t)m3idx__work_map_capacity_of(
      REQS, WIDTH, m3idx__work_chunk_blocks(c.query_len, c.num_heads));
  return c;
}

/* Scores of call i: heads x rows x WIDTH. */
static int scores_of(int i) {
  const m3idx_call c = check_call(i, NULL, NULL, NULL);
  return c.num_heads * c.num_rows * WIDTH;
}

/* Call c (host memory) staged into d and scored with kernels k on st,
 * its scores copied back into c.scores; err is the device error word. */
static hipError_t run_call(const m3idx_call &c, const gpu_kernels &k, char *d, unsigned *err,
                           hipStream_t st) {
  const stage_plan plan = stage_plan_of(&c);
  m3idx_call dc;
  hipError_t e = stage_in(&c, plan, d, st, &dc);
  gpu_call g = gpu_call_of(&dc, err);
  if (e == hipSuccess && c.mode == M3IDX_MODE_DECODE)
    e = m3idx_gpu_work_map(g, dc.work_map_out, c.work_map_capacity,
                           m3idx__work_chunk_blocks(c.query_len, c.num_heads), st);
  if (e == hipSuccess)
    e = m3idx_gpu_score(g, k, dc.work_map_out, c.work_map_capacity, st);
  if (e == hipSuccess)
    e = stage_out(&c, plan, d, st);
  return e;
}

/* The batch through the plain row alone and through with, into plain
 * and other; hipSuccess, or the failed call's status with *what. */
static hipError_t run_both(const check_batch &b, const gpu_kernels &with, float *plain,
                           float *other, int32_t *map, unsigned *bits, const char **what) {
  gpu_kernels alone = with;
  alone.rows = 1u << (m3idx_gpu_kernel_count() - 1);
  size_t used = 0;
  for (int i = 0; i < CALLS; i++) {
    const m3idx_call c = check_call(i, &b, plain, map);
    const size_t u = stage_plan_of(&c).used;
    used = used > u ? used : u;
  }
  char *d = NULL;
  hipStream_t st = NULL;
  hipError_t e = hipSuccess;
#define TRY(call, name)                                                     \
  do {                                                                      \
    if (e == hipSuccess && (e = (call)) != hipSuccess)                      \
      *what = name;                                                         \
  } while (0)
  TRY(hipStreamCreate(&st), "hipStreamCreate");
  TRY(hipMalloc((void **)&d, used + 256), "hipMalloc");
  unsigned *err = (unsigned *)(d + used);
  TRY(hipMemsetAsync(err, 0, sizeof *err, st), "clearing the error word");
  for (int i = 0, at = 0; i < CALLS; at += scores_of(i), i++) {
    TRY(run_call(check_call(i, &b, plain + at, map), alone, d, err, st), "the plain row's kernels");
    TRY(run_call(check_call(i, &b, other + at, map), with, d, err, st), "the fast row's kernels");
    TRY(hipStreamSynchronize(st), "hipStreamSynchronize");
  }
  TRY(hipMemcpyAsync(bits, err, sizeof *bits, hipMemcpyDeviceToHost, st), "copy to host");
  TRY(hipStreamSynchronize(st), "hipStreamSynchronize");
#undef TRY
  /* Freeing cannot change the verdict; a failure of its own is dropped. */
  if (d)
    (void)hipFree(d);
  if (st)
    (void)hipStreamDestroy(st);
  return e;
}

hipError_t m3idx_gpu_self_check(const gpu_kernels &with, int *same, char *diff, size_t n,
                                const char **what) {
  *same = 0;
  int total = 0;
  for (int i = 0; i < CALLS; i++)
    total += scores_of(i);
  check_batch *b = (check_batch *)calloc(1, sizeof *b);
  float *plain = (float *)malloc(2 * (size_t)total * sizeof(float));
  int32_t *map = (int32_t *)malloc(8 * (size_t)REQS * WIDTH);
  hipError_t e = hipErrorOutOfMemory;
  *what = "host memory for the batch";
  unsigned bits = 0;
  if (b != NULL && plain != NULL && map != NULL) {
    uint64_t seed = 0x6d33696478ull;
    make_pages(b->pages, &seed);
    make_query(b->query, &seed);
    for (int r = 0, id = 0; r < REQS; r++)
      for (int j = 0; j < WIDTH; j++)
        b->bt[r * WIDTH + j] = j * 128 < seq_lens[r] ? id++ : -1;
    memset(plain, 0xff, 2 * (size_t)total * sizeof(float));
    e = run_both(*b, with, plain, plain + total, map, &bits, what);
  }
  const float *other = plain + total;
  if (e == hipSuccess && bits != 0) {
    snprintf(diff, n, "the batch was found invalid (device error bits 0x%x)", bits);
  } else if (e == hipSuccess) {
    *same = 1;
    for (int i = 0, at = 0; i < CALLS && *same; at += scores_of(i), i++)
      for (int j = 0; j < scores_of(i); j++) {
        uint32_t x, y;
        memcpy(&x, plain + at + j, 4);
        memcpy(&y, other + at + j, 4);
        if (x != y) {
          const int rows = check_call(i, NULL, NULL, NULL).num_rows;
          snprintf(diff, n, "%s head %d row %d block %d: 0x%08x, the plain path 0x%08x",
                   call_name[i], j / (rows * WIDTH), j / WIDTH % rows, j % WIDTH, y, x);
          *same = 0;
          break;
        }
      }
  }
  free(map);
  free(plain);
  free(b);
  return e;
}
