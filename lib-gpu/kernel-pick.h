/*
 * kernel-pick.h - the GPU scoring kernels a context runs, chosen in one
 * table (kernel-pick.hip): rows fastest first, the plain row last.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_GPU_KERNEL_PICK_H
#define M3IDX_GPU_KERNEL_PICK_H

#include <stddef.h>

#include "kernels.h"

#define M3IDX_GPU_MAX_KERNELS 8

/* A context's kernels: bit i of rows for row i of the table, grid[i] its
 * decode grid (the row's setup), and the path its fast rows launch
 * (M3IDX_GPU_PATH_FAST, or FAST_BROKEN under the guard's test). */
struct gpu_kernels {
  unsigned rows;
  int grid[M3IDX_GPU_MAX_KERNELS];
  int fast_path;
};

/* Once per context, on device (arch: its target name, "sm_90", "gfx950"):
 * every row of the table set up (its grid), then the rows the context may
 * run: M3IDX_HIP_PATH=auto (the default) takes the fast rows that passed
 * the self-check against the plain row (run once per device and process,
 * path-check.hip); plain takes the plain row alone; fast asks that every
 * fast row of the target passed; a row's name takes that row and the
 * plain one.  M3IDX_OK, or an error with its message in msg. */
int m3idx_gpu_pick_kernels(int device, const char *arch, gpu_kernels *k, char *msg, size_t n);

/* Score the call (decode over the work map, or prefill, by its mode) with
 * the first of k's rows that takes it. */
hipError_t m3idx_gpu_score(const gpu_call &c, const gpu_kernels &k, const int32_t *map,
                           int capacity, hipStream_t s);

/* The table's rows for the self-check: how many, which is the plain one
 * (the last), a row's name, and k for rows `only' plus the plain row. */
int m3idx_gpu_kernel_count(void);
const char *m3idx_gpu_kernel_name(int row);
gpu_kernels m3idx_gpu_kernels_only(const gpu_kernels &k, int row);

/* What m3idx_gpu_pick_kernels found for device: 1 when a fast row passed
 * its self-check, 0 when none did (or the target has none), -1 when not
 * yet checked; why receives the rows in use or why a fast one is not. */
int m3idx_gpu_path_verdict(int device, char *why, size_t n);

/* Tests only (devtools inject_broken_fast_path): the fast rows launch as
 * FAST_BROKEN, in the self-check too; each switch forgets the verdicts. */
void m3idx_gpu_break_fast_path(int on);

/* The self-check (path-check.hip): the seeded batch through rows `with'
 * (the plain row and one fast row) and through the plain row alone;
 * *same set when every score matched, else diff says where.  hipSuccess,
 * or the failed call's status with its name in *what. */
hipError_t m3idx_gpu_self_check(const gpu_kernels &with, int *same, char *diff, size_t n,
                                const char **what);

#endif /* M3IDX_GPU_KERNEL_PICK_H */
