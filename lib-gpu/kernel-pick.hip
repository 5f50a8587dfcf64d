/*
 * kernel-pick.hip - choose the GPU scoring kernel, in one table.
 *
 * Rows fastest first, the plain row last: a call runs on the first row
 * the context picked that takes its shape.  A new kernel is its own file
 * plus one row here: the self-check at context creation runs every fast
 * row against the plain one (path-check.hip), bit for bit, and a row that
 * differs is dropped with its reason on stderr.  M3IDX_HIP_PATH forces
 * the plain row, every fast row, or one row by name.  Dispatch keys on
 * the batch's mode and shape only, never on strides or pointers (a
 * captured graph replays with both fixed).
 *
 * SPDX-License-Identifier: MIT
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel-pick.h"

#define MAX_DEVICES 64

static bool any_target(const char *) { return true; }
#if !defined(M3IDX_HIP_PLATFORM_NVIDIA)
static bool is_gfx950(const char *arch) { return strcmp(arch, "gfx950") == 0; }
/* The targets with int8 MFMA that the build compiles score-mfma.hip for. */
static bool has_mfma(const char *arch) {
  return strcmp(arch, "gfx90a") == 0 || strcmp(arch, "gfx942") == 0 || is_gfx950(arch);
}
#endif

static bool every_call(const gpu_call &) { return true; }
static int pairs_of(const gpu_call &c) { return c.query_len * c.num_heads; }
/* Several (row, head) pairs a decode request, or prefill. */
static bool several_pairs(const gpu_call &c) {
  return c.mode == M3IDX_MODE_PREFILL || pairs_of(c) >= 2;
}
static bool one_pair(const gpu_call &c) { return pairs_of(c) == 1; }
/* Prefill, or 16 pairs a request or more: the gemm row's tile of 16
 * pairs full (with 4 it took 1.7x the mma row's time; TUNING-NOTES,
 * 2026-12-06). */
static bool full_tiles(const gpu_call &c) {
  return c.mode == M3IDX_MODE_PREFILL || pairs_of(c) >= 16;
}

/* Each row's launchers, defined in its kernel's file: decode over the work
 * map, prefill, and the setup that gives the row's decode grid (0 where
 * it cannot run on the current device). */
hipError_t m3idx_gpu_decode_fp64(const gpu_call &c, const int32_t *map, int capacity,
                                 hipStream_t s);
hipError_t m3idx_gpu_prefill_fp64(const gpu_call &c, hipStream_t s);
hipError_t m3idx_gpu_setup_fp64(int path, int *grid);
#if defined(M3IDX_HIP_PLATFORM_NVIDIA)
hipError_t m3idx_gpu_decode_gemm(const gpu_call &c, const int32_t *map, int capacity,
                                 hipStream_t s);
hipError_t m3idx_gpu_prefill_gemm(const gpu_call &c, hipStream_t s);
hipError_t m3idx_gpu_setup_gemm(int path, int *grid);
hipError_t m3idx_gpu_decode_mma(const gpu_call &c, const int32_t *map, int capacity,
                                hipStream_t s);
hipError_t m3idx_gpu_prefill_mma(const gpu_call &c, hipStream_t s);
hipError_t m3idx_gpu_decode_staged(const gpu_call &c, const int32_t *map, int capacity,
                                   hipStream_t s);
hipError_t m3idx_gpu_setup_staged(int path, int *grid);
#else
hipError_t m3idx_gpu_decode_mfma(const gpu_call &c, const int32_t *map, int capacity,
                                 hipStream_t s);
hipError_t m3idx_gpu_prefill_mfma(const gpu_call &c, hipStream_t s);
hipError_t m3idx_gpu_setup_mfma(int path, int *grid);
#endif

struct gpu_kernel {
  const char *name; /* what M3IDX_HIP_PATH names */
  const char *uses; /* what it runs on, for the "why" text */
  bool (*on)(const char *arch);
  bool (*usable)(const gpu_call &c);
  hipError_t (*setup)(int path, int *grid);
  hipError_t (*decode)(const gpu_call &c, const int32_t *map, int capacity, hipStream_t s);
  hipError_t (*prefill)(const gpu_call &c, hipStream_t s);
};

static const gpu_kernel table[] = {
#if defined(M3IDX_HIP_PLATFORM_NVIDIA)
    {"gemm", "the pairs by the keys as a GEMM on the tensor cores (mma.sync)", any_target,
     full_tiles, m3idx_gpu_setup_gemm, m3idx_gpu_decode_gemm, m3idx_gpu_prefill_gemm},
    /* mma's decode takes the grid of the vector kernel of its path, about
       twice the blocks its own occupancy keeps resident (TUNING-NOTES,
       2026-12-06). */
    {"mma", "the integer filter on the tensor cores (mma.sync)", any_target, several_pairs,
     m3idx_gpu_setup_fp64, m3idx_gpu_decode_mma, m3idx_gpu_prefill_mma},
    {"staged", "pages staged in shared memory by cp.async.bulk (sm_90 and later)", any_target,
     one_pair, m3idx_gpu_setup_staged, m3idx_gpu_decode_staged, nullptr},
    {"int-filter", "the integer filter (prmt, dp4a)", any_target, every_call,
     m3idx_gpu_setup_fp64, m3idx_gpu_decode_fp64, m3idx_gpu_prefill_fp64},
#else
    {"mfma", "the pairs by the keys on the matrix cores (int8 MFMA)", has_mfma, several_pairs,
     m3idx_gpu_setup_mfma, m3idx_gpu_decode_mfma, m3idx_gpu_prefill_mfma},
    {"gfx950", "v_cvt_scalef32_pk_f32_fp4 decode, v_permlane16_swap maxima", is_gfx950,
     every_call, m3idx_gpu_setup_fp64, m3idx_gpu_decode_fp64, m3idx_gpu_prefill_fp64},
#endif
    {"plain", "the vector units", any_target, every_call, m3idx_gpu_setup_fp64,
     m3idx_gpu_decode_fp64, m3idx_gpu_prefill_fp64},
};
#define NKERNELS ((int)(sizeof table / sizeof table[0]))
#define PLAIN (NKERNELS - 1)
static_assert(NKERNELS <= M3IDX_GPU_MAX_KERNELS, "gpu_kernels holds every row");

int m3idx_gpu_kernel_count(void) { return NKERNELS; }
const char *m3idx_gpu_kernel_name(int row) { return table[row].name; }

gpu_kernels m3idx_gpu_kernels_only(const gpu_kernels &k, int row) {
  gpu_kernels o = k;
  o.rows = (1u << row) | (1u << PLAIN);
  return o;
}

hipError_t m3idx_gpu_score(const gpu_call &c, const gpu_kernels &k, const int32_t *map,
                           int capacity, hipStream_t s) {
  const bool decode = c.mode == M3IDX_MODE_DECODE;
  if (decode ? capacity <= 0 : c.num_rows == 0)
    return hipSuccess;
  for (int i = 0; i < NKERNELS; i++) {
    const gpu_kernel &row = table[i];
    if (!((k.rows >> i) & 1u) || (decode ? !row.decode : !row.prefill) || !row.usable(c))
      continue;
    gpu_call g = c;
    g.grid = k.grid[i];
    g.path = i == PLAIN ? M3IDX_GPU_PATH_PLAIN : k.fast_path;
    return decode ? row.decode(g, map, capacity, s) : row.prefill(g, s);
  }
  return hipErrorInvalidValue; /* the plain row takes every call */
}

hipError_t m3idx_gpu_decode_grid(const void *kernel, int threads, size_t smem, int *grid) {
  int device = 0, sms = 0, per_sm = 0;
  hipError_t e = hipGetDevice(&device);
  if (e == hipSuccess)
    e = hipDeviceGetAttribute(&sms, hipDeviceAttributeMultiprocessorCount, device);
  if (e == hipSuccess)
    e = hipOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem);
  *grid = M3IDX_GPU_DECODE_WAVES * (sms > 0 ? sms : 1) * (per_sm > 0 ? per_sm : 1);
  return e;
}

#if defined(M3IDX_HIP_PLATFORM_NVIDIA)
hipError_t m3idx_gpu_staged_grid(const void *kernel, int threads, size_t smem, int *grid) {
  *grid = 0;
  hipFuncAttributes fa;
  const hipError_t e = hipFuncGetAttributes(&fa, kernel);
  if (e != hipSuccess || fa.binaryVersion < 90)
    return e;
  if (hipFuncSetAttribute(kernel, hipFuncAttributeMaxDynamicSharedMemorySize, (int)smem) !=
          hipSuccess ||
      m3idx_gpu_decode_grid(kernel, threads, smem, grid) != hipSuccess) {
    (void)hipGetLastError();
    *grid = 0;
  }
  return hipSuccess;
}
#endif

/* ---- the self-check's verdicts, per device and process ----------------- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int checked[MAX_DEVICES];       /* 0: not yet */
static unsigned passed[MAX_DEVICES];   /* the rows that matched the plain one */
static unsigned failed[MAX_DEVICES];   /* the fast rows that did not */
static char reason[MAX_DEVICES][768];  /* the rows in use, or why not */
static int broken;                     /* tests: fast rows launch as FAST_BROKEN */

static void append(char *buf, size_t n, const char *fmt, const char *a, const char *b,
                   const char *c) {
  const size_t at = strlen(buf);
  snprintf(buf + at, n - at, fmt, a, b, c);
}

/* Run the self-check of every fast row that this device can run (avail),
 * under the lock.  M3IDX_OK, or M3IDX_ERR_DEVICE with msg. */
static int check_rows(int device, const char *arch, const gpu_kernels &k, unsigned avail,
                      char *msg, size_t n) {
  char inuse[384] = "", fails[512] = "";
  unsigned ok = 1u << PLAIN, bad = 0u;
  for (int i = 0; i < PLAIN; i++) {
    if (!((avail >> i) & 1u))
      continue;
    int same = 0;
    char diff[256] = "";
    const char *what = "";
    const hipError_t e =
        m3idx_gpu_self_check(m3idx_gpu_kernels_only(k, i), &same, diff, sizeof diff, &what);
    if (e != hipSuccess) {
      snprintf(msg, n, "the self-check of the %s kernel %s: %s: %s", arch, table[i].name, what,
               hipGetErrorString(e));
      return M3IDX_ERR_DEVICE;
    }
    if (same) {
      ok |= 1u << i;
      append(inuse, sizeof inuse, "%s%s (%s)", inuse[0] ? ", " : "", table[i].name,
             table[i].uses);
      continue;
    }
    bad |= 1u << i;
    char line[448];
    snprintf(line, sizeof line,
             "device %d (%s): the fast kernel %s differs from the plain path on the "
             "self-check batch (%s); it is not used",
             device, arch, table[i].name, diff);
    fprintf(stderr, "m3idx: %s\n", line);
    append(fails, sizeof fails, "%s%s%s", fails[0] ? "; " : "", line, "");
  }
  if (inuse[0] == '\0' && fails[0] == '\0')
    snprintf(reason[device], sizeof reason[device], "%s has no fast path", arch);
  else
    snprintf(reason[device], sizeof reason[device], "%s%s%s%s%s", inuse[0] ? arch : "",
             inuse[0] ? " fast path: " : "", inuse, inuse[0] && fails[0] ? "; " : "", fails);
  passed[device] = ok;
  failed[device] = bad;
  checked[device] = 1;
  return M3IDX_OK;
}

/* The row M3IDX_HIP_PATH names, -1 for auto and -2 for fast; -3 and a
 * message when it names nothing of this build. */
static int wanted_row(const char *want, char *msg, size_t n) {
  if (want == NULL || *want == '\0' || strcmp(want, "auto") == 0)
    return -1;
  if (strcmp(want, "fast") == 0)
    return -2;
  for (int i = 0; i < NKERNELS; i++)
    if (strcmp(want, table[i].name) == 0)
      return i;
  char names[256] = "";
  for (int i = 0; i < NKERNELS; i++)
    append(names, sizeof names, "%s%s%s", names[0] ? ", " : "", table[i].name, "");
  snprintf(msg, n, "M3IDX_HIP_PATH is '%s': it takes auto, fast or a kernel of this build (%s)",
           want, names);
  return -3;
}

int m3idx_gpu_pick_kernels(int device, const char *arch, gpu_kernels *k, char *msg, size_t n) {
  const char *want = getenv("M3IDX_HIP_PATH");
  const int row = wanted_row(want, msg, n);
  if (row == -3)
    return M3IDX_ERR_INVALID_ARGUMENT;
  pthread_mutex_lock(&lock);
  *k = gpu_kernels{};
  k->fast_path = broken ? M3IDX_GPU_PATH_FAST_BROKEN : M3IDX_GPU_PATH_FAST;
  unsigned avail = 0u; /* the fast rows this device runs */
  for (int i = 0; i < NKERNELS; i++) {
    const hipError_t e = table[i].setup(i == PLAIN ? M3IDX_GPU_PATH_PLAIN : k->fast_path,
                                        &k->grid[i]);
    if (e != hipSuccess) {
      pthread_mutex_unlock(&lock);
      snprintf(msg, n, "setting up the scoring kernel %s (occupancy): %s", table[i].name,
               hipGetErrorString(e));
      return M3IDX_ERR_BACKEND_UNAVAILABLE;
    }
    if (i != PLAIN && table[i].on(arch) && k->grid[i] > 0)
      avail |= 1u << i;
  }
  k->rows = 1u << PLAIN;
  if (row == PLAIN) {
    pthread_mutex_unlock(&lock);
    return M3IDX_OK;
  }
  if (device < 0 || device >= MAX_DEVICES) {
    pthread_mutex_unlock(&lock);
    snprintf(msg, n, "device %d: the fast kernels are checked for devices 0 to %d only", device,
             MAX_DEVICES - 1);
    return row == -1 ? M3IDX_OK : M3IDX_ERR_BACKEND_UNAVAILABLE;
  }
  if (!checked[device]) {
    const int rc = check_rows(device, arch, *k, avail, msg, n);
    if (rc != M3IDX_OK) {
      pthread_mutex_unlock(&lock);
      return rc;
    }
  }
  const unsigned ok = passed[device] & (avail | 1u << PLAIN);
  int rc = M3IDX_OK;
  if (row == -1) {
    k->rows = ok;
  } else if (row == -2) {
    if (failed[device] != 0u || avail == 0u) {
      snprintf(msg, n, "M3IDX_HIP_PATH is fast, but %s", reason[device]);
      rc = M3IDX_ERR_BACKEND_UNAVAILABLE;
    }
    k->rows = ok;
  } else if (!((ok >> row) & 1u)) {
    snprintf(msg, n, "M3IDX_HIP_PATH is %s, but %s", table[row].name,
             (avail >> row) & 1u ? reason[device] : "this device cannot run it");
    rc = M3IDX_ERR_BACKEND_UNAVAILABLE;
  } else {
    k->rows = 1u << row | 1u << PLAIN;
  }
  pthread_mutex_unlock(&lock);
  return rc;
}

int m3idx_gpu_path_verdict(int device, char *why, size_t n) {
  if (device < 0 || device >= MAX_DEVICES)
    return -1;
  pthread_mutex_lock(&lock);
  const int v = !checked[device] ? -1 : passed[device] != 1u << PLAIN ? 1 : 0;
  snprintf(why, n, "%s", v >= 0 ? reason[device] : "not checked");
  pthread_mutex_unlock(&lock);
  return v;
}

void m3idx_gpu_break_fast_path(int on) {
  pthread_mutex_lock(&lock);
  broken = on != 0;
  memset(checked, 0, sizeof checked);
  pthread_mutex_unlock(&lock);
}
