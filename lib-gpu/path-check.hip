/*
 * path-check.hip - which scoring path a device's contexts use (kernels.h).
 *
 * A target's fast path uses instructions that nothing here can run for
 * every target (no AMD GPU is reachable where this is built), so before a
 * context uses it, a small seeded batch goes through it and through the
 * plain path (decode with several pairs and with one pair a request, and
 * prefill), and every score must match bit for bit.
 * On any difference the plain path runs and the reason goes to stderr
 * once.  The verdict is kept per device for the process.
 *
 * SPDX-License-Identifier: MIT
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer-plan.h"
#include "kernels.h"
#include "m3idx.h"
#include "spec-rules.h"
#include "work-map.h"

#define MAX_DEVICES 64

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int verdict[MAX_DEVICES]; /* 0 unknown, 1 fast, 2 plain */
static char reason[MAX_DEVICES][384];
static int broken;               /* tests: FAST launches as FAST_BROKEN */

/* The fast path of a target, or NULL when it has none. */
static const char *fast_path_of(const char *arch) {
#if defined(M3IDX_HIP_PLATFORM_NVIDIA)
  (void)arch;
  return "integer filter (prmt, dp4a)";
#else
  if (strcmp(arch, "gfx950") == 0)
    return "v_cvt_scalef32_pk_f32_fp4 decode, v_permlane16_swap maxima";
  return NULL;
#endif
}

/* ---- the seeded batch --------------------------------------------------- */

enum { REQS = 3, HEADS = 4, QLEN = 2, WIDTH = 8, PAGES = 15, ROWS = 26 };
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

/* ---- one run of both modes on a path ------------------------------------ */

struct check_mem {
  uint8_t *pages;
  uint16_t *query;
  int32_t *bt, *seq, *cu, *ctx, *map;
  unsigned *err;
  float *scores; /* decode (HEADS x QLEN*REQS x WIDTH), prefill (HEADS x ROWS x WIDTH),
                   then one-pair decode (REQS x WIDTH) */
  int cap, chunk, cap1, chunk1; /* the map's capacity and chunk; those of one pair */
};

#define DECODE_SCORES (HEADS * REQS * QLEN * WIDTH)
#define PREFILL_SCORES (HEADS * ROWS * WIDTH)
#define ONE_SCORES (REQS * WIDTH) /* decode with one pair a request */
#define ALL_SCORES (DECODE_SCORES + PREFILL_SCORES + ONE_SCORES)

static hipError_t run_path(const check_mem &m, int path, int one_grid, int staged_grid,
                           hipStream_t st) {
  gpu_call g{};
  g.num_reqs = REQS;
  g.num_heads = HEADS;
  g.max_seq_len = WIDTH * 128;
  g.width = WIDTH;
  g.seq_lens = m.seq;
  g.query = m.query;
  g.dtype = 1;
  g.pages = m.pages;
  g.num_pages = PAGES;
  g.block_table = m.bt;
  g.bt_stride = WIDTH;
  g.stride = WIDTH;
  g.err = m.err;
  g.one_grid = one_grid;
  g.staged_grid = staged_grid;
  g.path = path;
  hipError_t e = hipMemsetAsync(m.scores, 0xff, ALL_SCORES * 4, st);
  /* decode, scale 0.625 */
  g.mode = 1;
  g.query_len = QLEN;
  g.num_rows = REQS * QLEN;
  g.scale = 0.625f;
  g.scores = m.scores;
  if (e == hipSuccess)
    e = m3idx_gpu_work_map(&g, m.map, m.cap, m.chunk, st);
  if (e == hipSuccess)
    e = m3idx_gpu_score_decode(&g, m.map, m.cap, st);
  /* prefill, scale -0.375: the filter then looks for the smallest D */
  g.mode = 2;
  g.query_len = 0;
  g.num_rows = ROWS;
  g.cu_seqlens_q = m.cu;
  g.context_lens = m.ctx;
  g.scale = -0.375f;
  g.scores = m.scores + DECODE_SCORES;
  if (e == hipSuccess)
    e = m3idx_gpu_score_prefill(&g, st);
  /* decode with one pair a request (on NVIDIA, the staged kernel), scale 1.5 */
  g.mode = 1;
  g.num_heads = 1;
  g.query_len = 1;
  g.num_rows = REQS;
  g.scale = 1.5f;
  g.scores = m.scores + DECODE_SCORES + PREFILL_SCORES;
  if (e == hipSuccess)
    e = m3idx_gpu_work_map(&g, m.map, m.cap1, m.chunk1, st);
  if (e == hipSuccess)
    e = m3idx_gpu_score_decode(&g, m.map, m.cap1, st);
  return e;
}

/* Run the batch on both paths and compare.  hipSuccess with *same set,
 * or the failed call's status with its name in *what. */
static hipError_t self_check(int fast, int *same, char *diff, size_t n, const char **what) {
  check_mem m{};
  m.chunk = m3idx__work_chunk_blocks(QLEN, HEADS);
  m.cap = (int)m3idx__work_map_capacity_of(REQS, WIDTH, m.chunk);
  m.chunk1 = m3idx__work_chunk_blocks(1, 1);
  m.cap1 = (int)m3idx__work_map_capacity_of(REQS, WIDTH, m.chunk1);
  const size_t score_bytes = ALL_SCORES * 4;
  buffer_plan plan; /* the batch's arrays, the same offsets on host and device */
  const size_t o_pages = plan.take((size_t)PAGES * M3IDX_PAGE_BYTES);
  const size_t o_query = plan.take(ROWS * HEADS * M3IDX_HEAD_DIM * 2);
  const size_t o_bt = plan.take(REQS * WIDTH * 4), o_seq = plan.take(sizeof seq_lens);
  const size_t o_cu = plan.take(sizeof cu_seqlens_q), o_ctx = plan.take(sizeof context_lens);
  const size_t o_map = plan.take((size_t)(m.cap > m.cap1 ? m.cap : m.cap1) * 8);
  const size_t o_err = plan.take(4);
  const size_t o_scores = plan.take(score_bytes), total = plan.used;
  uint8_t *host = (uint8_t *)calloc(1, total + 2 * score_bytes);
  uint8_t *dev = NULL;
  hipStream_t st = NULL;
  hipError_t e = hipErrorOutOfMemory;
  *what = "host memory for the batch";
  if (host == NULL)
    return e;
  uint64_t seed = 0x6d33696478ull;
  make_pages(host + o_pages, &seed);
  make_query((uint16_t *)(host + o_query), &seed);
  int32_t *bt = (int32_t *)(host + o_bt);
  for (int r = 0, id = 0; r < REQS; r++)
    for (int b = 0; b < WIDTH; b++)
      bt[r * WIDTH + b] = b * 128 < seq_lens[r] ? id++ : -1;
  memcpy(host + o_seq, seq_lens, sizeof seq_lens);
  memcpy(host + o_cu, cu_seqlens_q, sizeof cu_seqlens_q);
  memcpy(host + o_ctx, context_lens, sizeof context_lens);
  float *plain = (float *)(host + total), *other = plain + ALL_SCORES;
  /* A grid as large as the map: a launch takes no more blocks than that. */
  const int grid = m.cap > m.cap1 ? m.cap : m.cap1;
  int staged = 0; /* the staged kernel's grid, where the fast path has one */
  unsigned bits = 0;
#define TRY(call, name)                                                     \
  do {                                                                      \
    if (e == hipSuccess && (e = (call)) != hipSuccess)                      \
      *what = name;                                                         \
  } while (0)
  e = hipSuccess;
  TRY(hipStreamCreate(&st), "hipStreamCreate");
  TRY(hipMalloc((void **)&dev, total), "hipMalloc");
  if (e == hipSuccess) {
    m.pages = dev + o_pages;
    m.query = (uint16_t *)(dev + o_query);
    m.bt = (int32_t *)(dev + o_bt);
    m.seq = (int32_t *)(dev + o_seq);
    m.cu = (int32_t *)(dev + o_cu);
    m.ctx = (int32_t *)(dev + o_ctx);
    m.map = (int32_t *)(dev + o_map);
    m.err = (unsigned *)(dev + o_err);
    m.scores = (float *)(dev + o_scores);
  }
  TRY(hipMemcpyAsync(dev, host, total, hipMemcpyHostToDevice, st), "copy to device");
#if defined(M3IDX_HIP_PLATFORM_NVIDIA)
  TRY(m3idx_gpu_score_decode_staged_setup(fast, &staged), "the staged kernel's setup");
  if (staged > 0)
    staged = grid;
#endif
  TRY(run_path(m, M3IDX_GPU_PATH_PLAIN, grid, 0, st), "the plain path's kernels");
  TRY(hipMemcpyAsync(plain, m.scores, score_bytes, hipMemcpyDeviceToHost, st), "copy to host");
  TRY(run_path(m, fast, grid, staged, st), "the fast path's kernels");
  TRY(hipMemcpyAsync(other, m.scores, score_bytes, hipMemcpyDeviceToHost, st), "copy to host");
  TRY(hipMemcpyAsync(&bits, m.err, 4, hipMemcpyDeviceToHost, st), "copy to host");
  TRY(hipStreamSynchronize(st), "hipStreamSynchronize");
#undef TRY
  *same = 0;
  if (e == hipSuccess && bits != 0) {
    snprintf(diff, n, "the batch was found invalid (device error bits 0x%x)", bits);
  } else if (e == hipSuccess) {
    *same = 1;
    for (int i = 0; i < ALL_SCORES; i++) {
      uint32_t a, b;
      memcpy(&a, plain + i, 4);
      memcpy(&b, other + i, 4);
      if (a != b) {
        const int part = i < DECODE_SCORES ? 0 : i < DECODE_SCORES + PREFILL_SCORES ? 1 : 2;
        const int j = i - (part > 0 ? DECODE_SCORES : 0) - (part > 1 ? PREFILL_SCORES : 0);
        const int rows = part == 0 ? REQS * QLEN : part == 1 ? ROWS : REQS;
        static const char *const name[3] = {"decode", "prefill", "one-pair decode"};
        snprintf(diff, n, "%s head %d row %d block %d: 0x%08x, the plain path 0x%08x",
                 name[part], j / (rows * WIDTH), j / WIDTH % rows, j % WIDTH, b, a);
        *same = 0;
        break;
      }
    }
  }
  /* Freeing cannot change the verdict; a failure of its own is dropped. */
  if (dev)
    (void)hipFree(dev);
  if (st)
    (void)hipStreamDestroy(st);
  free(host);
  return e;
}

/* ---- the verdict -------------------------------------------------------- */

int m3idx_gpu_pick_path(int device, const char *arch, int *path, char *msg, size_t n) {
  const char *want = getenv("M3IDX_HIP_PATH");
  if (want == NULL || *want == '\0')
    want = "auto";
  if (strcmp(want, "auto") != 0 && strcmp(want, "plain") != 0 && strcmp(want, "fast") != 0) {
    snprintf(msg, n, "M3IDX_HIP_PATH is '%s': it takes plain, fast or auto", want);
    return M3IDX_ERR_INVALID_ARGUMENT;
  }
  *path = M3IDX_GPU_PATH_PLAIN;
  if (strcmp(want, "plain") == 0)
    return M3IDX_OK;
  if (device < 0 || device >= MAX_DEVICES) {
    snprintf(msg, n, "device %d: the fast path is checked for devices 0 to %d only", device,
             MAX_DEVICES - 1);
    return strcmp(want, "fast") == 0 ? M3IDX_ERR_BACKEND_UNAVAILABLE : M3IDX_OK;
  }
  const char *fast = fast_path_of(arch);
  pthread_mutex_lock(&lock);
  const int run = broken ? M3IDX_GPU_PATH_FAST_BROKEN : M3IDX_GPU_PATH_FAST;
  if (verdict[device] == 0 && fast == NULL) {
    verdict[device] = 2;
    snprintf(reason[device], sizeof reason[device], "%s has no fast path", arch);
  }
  if (verdict[device] == 0) {
    int same = 0;
    char diff[256] = "";
    const char *what = "";
    hipError_t e = self_check(run, &same, diff, sizeof diff, &what);
    if (e != hipSuccess) {
      pthread_mutex_unlock(&lock);
      snprintf(msg, n, "the self-check of the %s fast path: %s: %s", arch, what,
               hipGetErrorString(e));
      return M3IDX_ERR_DEVICE;
    }
    verdict[device] = same ? 1 : 2;
    if (same) {
      snprintf(reason[device], sizeof reason[device], "%s fast path: %s", arch, fast);
    } else {
      snprintf(reason[device], sizeof reason[device],
               "device %d (%s): the fast path (%s) differs from the plain path on the "
               "self-check batch (%s); the plain path runs",
               device, arch, fast, diff);
      fprintf(stderr, "m3idx: %s\n", reason[device]);
    }
  }
  const int ok = verdict[device] == 1;
  if (!ok && strcmp(want, "fast") == 0)
    snprintf(msg, n, "M3IDX_HIP_PATH is fast, but %s", reason[device]);
  pthread_mutex_unlock(&lock);
  if (ok)
    *path = run;
  return ok || strcmp(want, "fast") != 0 ? M3IDX_OK : M3IDX_ERR_BACKEND_UNAVAILABLE;
}

int m3idx_gpu_path_verdict(int device, char *why, size_t n) {
  if (device < 0 || device >= MAX_DEVICES)
    return -1;
  pthread_mutex_lock(&lock);
  const int v = verdict[device];
  snprintf(why, n, "%s", v ? reason[device] : "not checked");
  pthread_mutex_unlock(&lock);
  return v == 0 ? -1 : v == 1 ? 1 : 0;
}

void m3idx_gpu_break_fast_path(int on) {
  pthread_mutex_lock(&lock);
  broken = on != 0;
  memset(verdict, 0, sizeof verdict);
  pthread_mutex_unlock(&lock);
}
