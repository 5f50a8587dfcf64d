/*
 * work-map.hip - the decode work map built on the device from seq_lens,
 * in place, so that a captured graph replays it each step (SPEC section 9).
 * One block of threads: count each request's entries, scan, write; the
 * rest of the capacity is marked unused.  Bad lengths or too small a
 * capacity write nothing and set a bit in *err.
 *
 * SPDX-License-Identifier: MIT
 */
#include "device-math.h"
#include "work-map.h"

#define MAP_THREADS 256

__global__ void __launch_bounds__(MAP_THREADS)
work_map_kernel(gpu_call c, int32_t *map, int capacity, int chunk) {
  __shared__ long long offset[MAP_THREADS + 1];
  __shared__ int bad;
  const int t = threadIdx.x;
  const int per = (c.num_reqs + MAP_THREADS - 1) / MAP_THREADS;
  const int r0 = t * per, r1 = min(c.num_reqs, r0 + per);
  if (t == 0)
    bad = 0;
  __syncthreads();
  long long count = 0;
  for (int r = r0; r < r1; r++) {
    int s = c.seq_lens[r];
    if (!decode_len_ok(c, s))
      atomicOr(&bad, (int)M3IDX_GPU_BAD_SEQ_LENS);
    else
      count += m3idx__work_entries_of(m3idx__blocks_of(s), chunk);
  }
  offset[t + 1] = count;
  __syncthreads();
  if (t == 0) {
    offset[0] = 0;
    for (int i = 1; i <= MAP_THREADS; i++)
      offset[i] += offset[i - 1];
    if (bad == 0 && offset[MAP_THREADS] > capacity)
      bad = (int)M3IDX_GPU_MAP_TOO_SMALL;
    if (bad)
      atomicOr(c.err, (unsigned)bad);
  }
  __syncthreads();
  if (bad)
    return;
  long long e = offset[t];
  for (int r = r0; r < r1; r++) {
    int n = m3idx__blocks_of(c.seq_lens[r]);
    for (int b0 = 0; b0 < n; b0 += chunk, e++) {
      int cnt = min(chunk, n - b0);
      map[2 * e] = r;
      map[2 * e + 1] = m3idx__work_entry(b0, cnt);
    }
  }
  for (long long u = offset[MAP_THREADS] + t; u < capacity; u += MAP_THREADS) {
    map[2 * u] = -1;
    map[2 * u + 1] = 0;
  }
}

hipError_t m3idx_gpu_work_map(const gpu_call &c, int32_t *map, int capacity, int chunk,
                              hipStream_t s) {
  hipLaunchKernelGGL(work_map_kernel, dim3(1), dim3(MAP_THREADS), 0, s, c, map, capacity, chunk);
  return hipGetLastError();
}
