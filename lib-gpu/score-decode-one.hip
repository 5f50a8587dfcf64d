/*
 * score-decode-one.hip - decode scoring when a call has one (row, head)
 * per request (query_len 1, one index head: the model's decode step), the
 * case that must stream pages at memory speed.
 *
 * Each group of 32 threads scores whole pages on its own, with no barrier
 * between pages: teams of 4 lanes own a key, lane g its scale group g (as
 * in score-core.h), 4 keys of the team at a time while the next 4 are on
 * their way; the page maximum goes through butterflies of distance 4, 8
 * and 16, inside any warp width.  The query stays in registers; e2m1
 * pairs come from the shared byte table.  The grid is the work map's
 * (fixed by its capacity, SPEC section 9): block of threads `part' of an
 * entry takes the entry's blocks part, part + ENTRY_SPLIT_ONE, ..., and
 * shares them among its groups of 32.
 *
 * SPDX-License-Identifier: MIT
 */
#include "score-core.h"

#include <stdlib.h>

#define ENTRY_SPLIT_ONE 2
#define GROUPS (SCORE_THREADS / 32)

/* The table, filled column by column so that the lanes of a warp write
 * 16 columns of 2 rows, without bank conflicts. */
M3IDX_DEV void fill_lut_by_columns(score_smem &sm) {
  const int col = threadIdx.x & 15, row0 = threadIdx.x >> 4;
  for (int byte = row0; byte < 256; byte += SCORE_THREADS / 16)
    sm.lut[byte][col] = make_float2(e2m1_f((uint32_t)byte & 15u), e2m1_f((uint32_t)byte >> 4));
}

template <bool FUSED, int STEP_KEYS>
M3IDX_DEV void step_sums(const score_smem &sm, const uint4 (&d)[STEP_KEYS], const float *q32,
                         float (&gs)[STEP_KEYS]) {
#pragma unroll
  for (int k = 0; k < STEP_KEYS; k++)
    gs[k] = group_sum<FUSED>(sm, d[k], q32);
}

/* STEP_KEYS: keys of a lane in flight at once. */
template <int STEP_KEYS>
__global__ void __launch_bounds__(SCORE_THREADS, STEP_KEYS == 4 ? 5 : 6)
score_decode_one_kernel(gpu_call c, const int32_t *map, int capacity) {
  __shared__ score_smem sm;
  const int t = threadIdx.x, lane = t & 31, group = t >> 5, team = lane >> 2, g = lane & 3;
  int r, s, b0, count;
  if (map_entry(c, map, blockIdx.x / ENTRY_SPLIT_ONE, &r, &s, &b0, &count) <= 0)
    return;
  const int part = blockIdx.x % ENTRY_SPLIT_ONE;
  if (part >= count)
    return;
  fill_lut_by_columns(sm);
  float q[32];
  int unfused;
  load_query(c, score_pair{r, 0, 128}, q, &unfused); /* row r: query_len 1 */
  __syncthreads();
  const int pos = s - 1, end = b0 + count, stride = ENTRY_SPLIT_ONE * GROUPS;
  /* This group's pages: b = first, first + stride, ... < end; each in
     128 / (8 * STEP_KEYS) steps of STEP_KEYS keys a lane. */
  const int first = b0 + part + ENTRY_SPLIT_ONE * group;
  const int steps = 128 / (8 * STEP_KEYS);
  const uint8_t *page = first < end ? page_of(c, r, first) : nullptr;
  uint4 cur[STEP_KEYS], nxt[STEP_KEYS];
  if (page)
#pragma unroll
    for (int k = 0; k < STEP_KEYS; k++)
      cur[k] = *(const uint4 *)(page + 64 * (team + 8 * k) + 16 * g);
  float best = nan_f();
  for (int b = first; b < end;) {
    for (int step = 0; step < steps; step++) {
      /* What comes next: the next step of this page, or the next page's first. */
      const uint8_t *np = page;
      int nstep = step + 1, nb = b;
      if (nstep == steps) {
        nstep = 0;
        nb = b + stride;
        np = nb < end ? page_of(c, r, nb) : nullptr;
      }
      if (np)
#pragma unroll
        for (int k = 0; k < STEP_KEYS; k++)
          nxt[k] = *(const uint4 *)(np + 64 * (team + 8 * (STEP_KEYS * nstep + k)) + 16 * g);
      if (page) {
        float gs[STEP_KEYS];
        if (unfused)
          step_sums<false, STEP_KEYS>(sm, cur, q, gs);
        else
          step_sums<true, STEP_KEYS>(sm, cur, q, gs);
#pragma unroll
        for (int k = 0; k < STEP_KEYS; k++) {
          const int key = team + 8 * (STEP_KEYS * step + k);
          float sg = gs[k] * e8m0_f(page[8192 + 4 * key + g]);
          float s01 = sg + M3IDX_SHFL_XOR(sg, 1);
          float dot = s01 + M3IDX_SHFL_XOR(s01, 2);
          float logit = dot * c.scale + 0.0f; /* -0 counts as +0 */
          if (b * 128 + key <= pos)
            best = fmaxf(best, logit); /* NaN-ignoring */
        }
      }
      if (nstep == 0) {
        /* Page b is done: its maximum over the 8 teams. */
        for (int m = 4; m < 32; m <<= 1)
          best = fmaxf(best, M3IDX_SHFL_XOR(best, m));
        if (page && lane == 0)
          store_score(c, 0, r, b, best);
        best = nan_f();
        page = np;
        b = nb;
      }
#pragma unroll
      for (int k = 0; k < STEP_KEYS; k++)
        cur[k] = nxt[k];
    }
  }
}

hipError_t m3idx_gpu_score_decode_one(const struct gpu_call *c, const int32_t *map,
                                      int capacity, hipStream_t s) {
  const char *e = getenv("M3IDX_GPU_DECODE"); /* tuning */
  void (*k)(gpu_call, const int32_t *, int) = score_decode_one_kernel<4>;
  if (e && e[0] == '2')
    k = score_decode_one_kernel<2>;
  hipLaunchKernelGGL(k, dim3((unsigned)capacity * ENTRY_SPLIT_ONE),
                     dim3(SCORE_THREADS), 0, s, *c, map, capacity);
  return hipGetLastError();
}
