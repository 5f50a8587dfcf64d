/*
 * score-decode-one.hip - decode scoring when a call has one (row, head)
 * per request (query_len 1, one index head: the model's decode step), the
 * case that must stream pages at memory speed.
 *
 * Each group of 32 threads scores whole pages on its own, with no barrier
 * between pages: teams of 4 lanes own a key, lane g its scale group g (as
 * in score-core.h), 4 keys of the team at a time while the next 4 are on
 * their way; the team's 4 lanes then finish one of the 4 keys each
 * (team_dots), and the page maximum goes through butterflies of distance
 * 1 to 16, inside any warp width.  The query stays in registers; e2m1
 * pairs come from the shared byte table.  The grid is the work map's
 * (fixed by its capacity, SPEC section 9): block of threads `part' of an
 * entry takes the entry's blocks part, part + ENTRY_SPLIT_ONE, ..., and
 * shares them among its groups of 32.
 *
 * SPDX-License-Identifier: MIT
 */
#include "score-core.h"

#define ENTRY_SPLIT_ONE 2 /* 2 and 4 measured 206 and 218 us at 64 x 128K on an H200 */

#define GROUPS (SCORE_THREADS / 32)
#define STEP_KEYS 4 /* keys of a lane in flight at once */
#define STEPS (128 / (8 * STEP_KEYS))

/* A lane's share of one step of a page: its group's 16 bytes of STEP_KEYS
 * keys, and their scale bytes. */
struct step_regs {
  uint4 d[STEP_KEYS];
  uint32_t sc[STEP_KEYS];
};

M3IDX_DEV int step_key(int team, int step, int k) { return team + 8 * (STEP_KEYS * step + k); }

M3IDX_DEV void load_step(const uint8_t *page, int step, int team, int g, step_regs &x) {
#pragma unroll
  for (int k = 0; k < STEP_KEYS; k++) {
    const int key = step_key(team, step, k);
    x.d[k] = *(const uint4 *)(page + 64 * key + 16 * g);
    x.sc[k] = page[8192 + 4 * key + g];
  }
}

template <bool FUSED>
M3IDX_DEV void step_sums(const score_smem &sm, const step_regs &x, const float *q32,
                         float (&gs)[STEP_KEYS]) {
#pragma unroll
  for (int k = 0; k < STEP_KEYS; k++)
    gs[k] = group_sum<FUSED>(sm, x.d[k], q32);
}

/* The dot product of key k of the step for lane k of the team, from the
 * team's scaled group sums: lane g holds group g of the 4 keys.  The team
 * transposes them in two exchanges, adding as it goes: after the first
 * (distance 1) a lane holds s_g + s_(g^1) of the keys with its parity,
 * after the second (distance 2) it adds the other pair's sum of its own
 * key.  Addition commutes, so every key gets (s0 + s1) + (s2 + s3)
 * bit for bit; 3 shuffles instead of 8 (203.0 -> 199.8 us at 64 x 128K). */
M3IDX_DEV float team_dots(const float (&gs)[STEP_KEYS], const uint32_t (&sc)[STEP_KEYS], int g) {
  static_assert(STEP_KEYS == 4, "a team of 4 lanes transposes 4 keys");
  float sg[STEP_KEYS];
#pragma unroll
  for (int k = 0; k < STEP_KEYS; k++)
    sg[k] = gs[k] * e8m0_f(sc[k]);
  const int odd = g & 1, high = g >> 1;
  /* keys odd and 2 + odd stay; the partner's group of them comes in */
  const float a = (odd ? sg[1] : sg[0]) + M3IDX_SHFL_XOR(odd ? sg[0] : sg[1], 1);
  const float b = (odd ? sg[3] : sg[2]) + M3IDX_SHFL_XOR(odd ? sg[2] : sg[3], 1);
  /* key g = odd + 2 high stays; the other pair's sum of it comes in */
  return (high ? b : a) + M3IDX_SHFL_XOR(high ? a : b, 2);
}

__global__ void __launch_bounds__(SCORE_THREADS, 5)
score_decode_one_kernel(gpu_call c, const int32_t *map, int capacity) {
  __shared__ score_smem sm;
  const int t = threadIdx.x, lane = t & 31, group = t >> 5, team = lane >> 2, g = lane & 3;
  int r, s, b0, count;
  if (map_entry(c, map, blockIdx.x / ENTRY_SPLIT_ONE, &r, &s, &b0, &count) <= 0)
    return;
  const int part = blockIdx.x % ENTRY_SPLIT_ONE;
  if (part >= count)
    return;
  fill_lut(sm);
  float q[32];
  int unfused;
  load_query(c, r, 0, q, &unfused); /* row r: query_len 1 */
  __syncthreads();
  const int pos = s - 1, end = b0 + count, stride = ENTRY_SPLIT_ONE * GROUPS;
  /* This group's pages: b = first, first + stride, ... < end, each in
     STEPS steps of STEP_KEYS keys a lane. */
  const int first = b0 + part + ENTRY_SPLIT_ONE * group;
  const uint8_t *page = first < end ? page_of(c, r, first) : nullptr;
  step_regs cur, nxt;
  if (page)
    load_step(page, 0, team, g, cur);
  float best = nan_f();
  for (int b = first; b < end;) {
#pragma unroll /* the steps of a page (1 and 2 a time: 206.7 and 210.0 us against 201.8) */
    for (int step = 0; step < STEPS; step++) {
      /* What comes next: the next step of this page, or the next page's first. */
      const uint8_t *np = page;
      int nstep = step + 1, nb = b;
      if (nstep == STEPS) {
        nstep = 0;
        nb = b + stride;
        np = nb < end ? page_of(c, r, nb) : nullptr;
      }
      if (np)
        load_step(np, nstep, team, g, nxt);
      if (page) {
        float gs[STEP_KEYS];
        if (unfused)
          step_sums<false>(sm, cur, q, gs);
        else
          step_sums<true>(sm, cur, q, gs);
        const float dot = team_dots(gs, cur.sc, g);
        const float logit = dot * c.scale + 0.0f; /* -0 counts as +0 */
        if (b * 128 + step_key(team, step, g) <= pos)
          best = fmaxf(best, logit); /* NaN-ignoring */
      }
      if (nstep == 0) {
        /* Page b is done: its maximum over the 32 lanes. */
        for (int m = 1; m < 32; m <<= 1)
          best = fmaxf(best, M3IDX_SHFL_XOR(best, m));
        if (page && lane == 0)
          store_score(c, 0, r, b, best);
        best = nan_f();
        page = np;
        b = nb;
      }
      cur = nxt;
    }
  }
}

hipError_t m3idx_gpu_score_decode_one(const struct gpu_call *c, const int32_t *map,
                                      int capacity, hipStream_t s) {
  hipLaunchKernelGGL(score_decode_one_kernel, dim3((unsigned)capacity * ENTRY_SPLIT_ONE),
                     dim3(SCORE_THREADS), 0, s, *c, map, capacity);
  return hipGetLastError();
}
