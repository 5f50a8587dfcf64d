/*
 * kernels.h - what the HIP kernels are given, and their launchers.
 *
 * Every pointer is device memory.  Kernels check the contents they read
 * (lengths, page ids, work-map entries) before using them, never read out
 * of bounds, and record bad input as bits in *err, which
 * m3idx_synchronize reports.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_GPU_KERNELS_H
#define M3IDX_GPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "gpu-runtime.h"
#include "backend.h"
#include "m3idx.h"

/* Bits of the device error word. */
#define M3IDX_GPU_BAD_SEQ_LENS 0x1u     /* seq_lens / query_len / max_seq_len */
#define M3IDX_GPU_BAD_PREFILL 0x2u      /* cu_seqlens_q / context_lens */
#define M3IDX_GPU_BAD_PAGE_ID 0x4u      /* block_table entry outside [0, num_pages) */
#define M3IDX_GPU_BAD_WORK_MAP 0x8u     /* an entry not of this batch */
#define M3IDX_GPU_MAP_TOO_SMALL 0x10u   /* work_map_capacity too small */

/* The scoring kernels' paths, which give the same bits: a kernel of the
 * pick table (kernel-pick.hip) is built as PLAIN, which runs on every
 * target, and as FAST, which uses the target's own instructions (NVIDIA's
 * integer filter, gfx950's e2m1 decode and lane swaps; see vendors/) and
 * runs only once the self-check at context creation (path-check.hip)
 * found it equal to the plain row.  FAST_BROKEN is FAST reading every
 * code byte's nibbles swapped: the deliberately broken path of that
 * check's test. */
#define M3IDX_GPU_PATH_PLAIN 0
#define M3IDX_GPU_PATH_FAST 1
#define M3IDX_GPU_PATH_FAST_BROKEN 2

/* A path as a type, for a launcher's kernel<P>. */
template <int P> struct path_type {
  static constexpr int value = P;
};

/* launch(path_type<P>()) for the P of Ps that equals path (a launcher
 * lists the paths its kernel is built for). */
template <int... Ps, class F> void on_path(int path, F launch) {
  ((path == Ps ? (launch(path_type<Ps>()), 0) : 0), ...);
}

/* What a kernel gets: the checked call itself (lib/backend.h; every
 * pointer device memory), and the device's extras. */
struct gpu_call : m3idx_call {
  unsigned *err;     /* the device error word */
  int grid;          /* the most blocks a decode scoring launch takes (its row's setup) */
  int path;          /* M3IDX_GPU_PATH_*, for the scoring kernel of the row picked */
  bool after_prior;  /* the select kernel may start before the kernel before it ends
                        (launch-after.h) */
};

/* The checked call as the kernels get it, with the context's error word. */
inline gpu_call gpu_call_of(const struct m3idx_call *c, unsigned *err) {
  gpu_call g{};
  static_cast<m3idx_call &>(g) = *c;
  g.err = err;
  return g;
}

/* The tiles of `pairs' (row, head) pairs that a prefill call's pairs fill. */
inline long long prefill_tiles(const gpu_call &c, int pairs) {
  return ((long long)c.num_rows * c.num_heads + pairs - 1) / pairs;
}

/* A prefill launch's grid: x over the key blocks, `blocks' a block; y
 * over the tiles, at most 65535 (the kernels step by gridDim.y); *ntiles
 * receives the tiles. */
inline dim3 prefill_grid(const gpu_call &c, int pairs, int blocks, int *ntiles) {
  const long long n = prefill_tiles(c, pairs);
  *ntiles = (int)n;
  return dim3((unsigned)((c.width + blocks - 1) / blocks), (unsigned)(n < 65535 ? n : 65535));
}

/* The scoring rows' launches: kernel_of(path_type<P>()) gives the row's
 * kernel for the call's path P among Ps.  Decode runs over the work map on
 * the row's grid (gpu_call.grid), or the map's capacity where smaller;
 * prefill on prefill_grid's grid for tiles of `pairs' pairs by `blocks'
 * key blocks. */
template <int... Ps, class KernelOf>
hipError_t launch_decode(const gpu_call &c, const int32_t *map, int capacity, int threads,
                         size_t smem, hipStream_t s, KernelOf kernel_of) {
  const int grid = capacity < c.grid ? capacity : c.grid;
  on_path<Ps...>(c.path, [&](auto p) {
    const auto kernel = kernel_of(p);
    hipLaunchKernelGGL(kernel, dim3(grid), dim3(threads), smem, s, c, map, capacity);
  });
  return hipGetLastError();
}

template <int... Ps, class KernelOf>
hipError_t launch_prefill(const gpu_call &c, int pairs, int blocks, int threads, size_t smem,
                          hipStream_t s, KernelOf kernel_of) {
  int ntiles;
  const dim3 grid = prefill_grid(c, pairs, blocks, &ntiles);
  on_path<Ps...>(c.path, [&](auto p) {
    const auto kernel = kernel_of(p);
    hipLaunchKernelGGL(kernel, grid, dim3(threads), smem, s, c, ntiles);
  });
  return hipGetLastError();
}

hipError_t m3idx_gpu_work_map(const gpu_call &c, int32_t *map, int capacity, int chunk,
                              hipStream_t s);

/* A scoring kernel's decode grid (gpu_call.grid), from its setup in the
 * pick table: M3IDX_GPU_DECODE_WAVES times the blocks that stay resident
 * (the occupancy of kernel, threads a block, smem dynamic bytes, on the
 * current device), so that a map of up to that many entries gives each
 * block at most one and the hardware hands the blocks to SMs as they free
 * up; fixed for the context, so that graph replays see one grid. */
#define M3IDX_GPU_DECODE_WAVES 4
hipError_t m3idx_gpu_decode_grid(const void *kernel, int threads, size_t smem, int *grid);
#if defined(M3IDX_HIP_PLATFORM_NVIDIA)
/* The same for a staged kernel (sm_90 and later, smem dynamic bytes past
 * the 48 KiB default): *grid 0 where it cannot run, a build for a target
 * before sm_90 (whose kernel is empty) or a device that cannot give a
 * block smem bytes (the refusal is cleared, not reported); an error only
 * where the runtime cannot describe the kernel. */
hipError_t m3idx_gpu_staged_grid(const void *kernel, int threads, size_t smem, int *grid);
#endif

/* Verification's bound terms of count items {query row, page, keys}
 * into terms [count][2] (verify-bound.hip; lib/verify-rules.h). */
hipError_t m3idx_gpu_bound_terms(const gpu_call &c, const int32_t *items,
                                 long long count, double *terms, hipStream_t s);

/* Verification's verdicts (verify-rows.hip), after the scoring kernel
 * left the exact scores in ref [pairs, width] (c->scores, pinned there)
 * and with room for their top-k in ref_ids [pairs, 16]: rows, row_dev
 * and err_seen [pairs] (memory the device writes, the host's pinned
 * memory included) receive each row's verdict, largest deviation and the
 * device error word as its block saw it at its end (their OR holds every
 * bit the call's kernels set); done [pairs, width] is the kernel's
 * scratch; terms (or NULL) [pairs, width, 2] receives every block's terms
 * first, for the largest deviation with candidate scores. */
hipError_t m3idx_gpu_verify_rows(const gpu_call &c, float *ref, int32_t *ref_ids,
                                 const int32_t *cand, const float *cand_scores,
                                 long long cand_stride, const m3idx_verify_options *o,
                                 m3idx_verify_row *rows, double *row_dev, unsigned *err_seen,
                                 uint8_t *done, double *terms, hipStream_t s);

/* Tests only (devtools inject_device_failure): the device calls switch to
 * a device ordinal that does not exist. */
extern int m3idx_gpu_inject_bad_device;
/* Pin (pin != 0) and/or select (topk != NULL): scores_in is read, and
 * pinned scores are written to c->scores when write_pinned. */
hipError_t m3idx_gpu_pin_topk(const gpu_call &c, const float *scores_in,
                              int pin, int write_pinned, int32_t *topk, hipStream_t s);

#endif /* M3IDX_GPU_KERNELS_H */
