/*
 * select-row.h - clamping, forced-block pinning and the top-16 of one
 * (row, head) pair (SPEC sections 6 and 7), by one block of
 * SELECT_THREADS threads, on rank keys that order (score, then block id)
 * totally, no two blocks sharing one, so the result does not depend on
 * how the work is split:
 *  1. the blocks fall into 32 groups by block id mod 32, and each group
 *     takes the largest score half of its keys (m3idx__rank_score, 32
 *     bits); the 16th largest of those 32 maxima is at most the 16th
 *     largest key's (16 groups, 16 distinct blocks, reach it);
 *  2. the keys whose score half is at or above it (few, unless many
 *     scores tie) are gathered in shared memory and each finds its rank
 *     among them;
 *  3. when too many are gathered, a radix select, eight bits at a time
 *     from the top with a shared histogram, finds the 16th largest key
 *     among them first.
 * A row of at most FLOOR_MIN_BLOCKS blocks skips step 1 and gathers
 * every key: ranking them costs less than the floor.
 * Each pass re-reads the row (small enough for the cache).  The pin/top-k
 * kernel (select.hip) and the verdict kernel (verify-rows.hip) call it.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_GPU_SELECT_ROW_H
#define M3IDX_GPU_SELECT_ROW_H

#include "device-math.h"

#define SELECT_THREADS 512
#define RADIX_BITS 8
#define RADIX_BINS (1 << RADIX_BITS)

#define GATHER_MAX 1024 /* keys ranked directly in shared memory */
#define FLOOR_MIN_BLOCKS 64 /* shorter rows gather every key: no floor */

struct select_smem {
  unsigned hist[RADIX_BINS];
  unsigned part[32];             /* sums of 8 bins each */
  unsigned gmax[SELECT_THREADS / 32][32]; /* [warp][lane]: a group's share */
  unsigned long long keys[GATHER_MAX];
  int n, digit, count;
  unsigned above;
};

/* The digit d of this pass: sum(hist[> d]) < want <= sum(hist[>= d]).
 * Sets sm.digit, sm.above (the keys in bins above it) and sm.count (in it). */
M3IDX_DEV void choose_digit(select_smem &sm, unsigned want) {
  const int t = threadIdx.x;
  if (t < 32) {
    unsigned s = 0;
    for (int i = 0; i < 8; i++)
      s += sm.hist[8 * t + i];
    sm.part[t] = s;
  }
  __syncthreads();
  if (t < 32) {
    unsigned above = 0;
    for (int m = t + 1; m < 32; m++)
      above += sm.part[m];
    if (above < want && want <= above + sm.part[t]) {
      for (int d = 8 * t + 7; d >= 8 * t; d--) {
        unsigned h = sm.hist[d];
        if (above + h >= want) {
          sm.digit = d;
          sm.above = above;
          sm.count = (int)h;
          break;
        }
        above += h;
      }
    }
  }
  __syncthreads();
}

/* The row's causal block count, or -1 (reported) for bad lengths. */
M3IDX_DEV int row_blocks(const gpu_call &c, int row, int *pos, int *req) {
  *pos = row_position(c, row, req);
  return *pos < 0 ? -1 : *pos / 128 + 1;
}

/* Pin and/or select one (row, head) pair's n scores (n from row_blocks;
 * -1: nothing): every one of the SELECT_THREADS threads of the block
 * calls. */
M3IDX_DEV void select_row(select_smem &sm, const gpu_call &c, int n, int row, int h,
                          const float *scores_in, int pin, int write_pinned, int32_t *topk) {
  const int t = threadIdx.x;
  if (n < 0)
    return; /* bad lengths: reported, nothing written */
  const long long off = ((long long)h * c.num_rows + row) * c.score_stride;
  const float *in = scores_in + off;
  /* The passes over the row are unrolled by 8, so that a thread has 8
     loads in flight, not one. */
  if (pin && write_pinned) {
#pragma unroll 8
    for (int b = t; b < n; b += SELECT_THREADS)
      c.scores[off + b] = m3idx__pinned(in[b], b, n, c.init_blocks, c.local_blocks);
  }
  if (topk == nullptr)
    return;
  /* After the writes above, pinning again is a no-op: every pass may
     apply it to what it reads. */
#define HALF_OF(b) m3idx__rank_score(pin ? m3idx__pinned(in[b], b, n, c.init_blocks, c.local_blocks) : in[b])
#define KEY_OF(b) m3idx__rank_key_join(HALF_OF(b), b)
  const int need = n < M3IDX_TOPK ? n : M3IDX_TOPK;
  /* 1. A floor: the need-th largest of the 32 groups' maxima of score
     halves (a group with no key gives 0; a floor of 0 lets every key
     pass).  Thread t reads blocks t mod 32 = its lane's group, so short
     rows still fill every group.  Only the passes' 32-bit halves are
     compared: the full keys are made for the few gathered. */
  unsigned m = 0;
  if (n > FLOOR_MIN_BLOCKS) {
#pragma unroll 8
    for (int b = t; b < n; b += SELECT_THREADS) {
      const unsigned half = HALF_OF(b);
      m = half > m ? half : m;
    }
  }
  sm.gmax[t >> 5][t & 31] = m;
  if (t == 0)
    sm.count = 0;
  __syncthreads();
  /* Every warp finds the floor itself: lane l its group's maximum, then
     the one with fewer than need above it and need at or above (n is
     the block's, so every lane shuffles or none). */
  unsigned floor_half = 0u;
  if (n > FLOOR_MIN_BLOCKS) {
    unsigned g = 0;
    for (int w = 0; w < SELECT_THREADS / 32; w++)
      g = sm.gmax[w][t & 31] > g ? sm.gmax[w][t & 31] : g;
    int above = 0, atleast = 0;
    for (int j = 0; j < 32; j++) {
      const unsigned o = M3IDX_SHFL32(g, j);
      above += o > g;
      atleast += o >= g;
    }
    const uint32_t hit = M3IDX_BALLOT32(above < need && need <= atleast);
    const unsigned at = M3IDX_SHFL32(g, hit != 0u ? __ffs((int)hit) - 1 : 0);
    floor_half = hit != 0u ? at : 0u;
  }
  /* 2. Gather the keys whose half is at or above the floor (the top
     `need' among them). */
#pragma unroll 8
  for (int b = t; b < n; b += SELECT_THREADS) {
    const unsigned half = HALF_OF(b);
    if (half >= floor_half) {
      int slot = atomicAdd(&sm.count, 1);
      if (slot < GATHER_MAX)
        sm.keys[slot] = m3idx__rank_key_join(half, b);
    }
  }
  __syncthreads();
  const int gathered = sm.count;
  int32_t *out = topk + ((long long)h * c.num_rows + row) * M3IDX_TOPK;
  if (gathered <= GATHER_MAX) {
    for (int i = t; i < gathered; i += SELECT_THREADS) {
      unsigned long long k = sm.keys[i];
      int rank = 0;
      for (int j = 0; j < gathered; j++)
        rank += sm.keys[j] > k;
      if (rank < M3IDX_TOPK)
        out[rank] = m3idx__rank_key_id(k);
    }
    if (t >= need && t < M3IDX_TOPK)
      out[t] = -1;
    return;
  }
  /* 3. Radix select of the need-th largest key over the keys whose half is
     at or above the floor. */
  unsigned long long prefix = 0, mask = 0;
  unsigned want = (unsigned)need;
  for (int shift = 64 - RADIX_BITS;; shift -= RADIX_BITS) {
    __syncthreads(); /* everyone has read sm before it is reused */
    for (int i = t; i < RADIX_BINS; i += SELECT_THREADS)
      sm.hist[i] = 0;
    __syncthreads();
    for (int b = t; b < n; b += SELECT_THREADS) {
      unsigned long long key = KEY_OF(b);
      if ((unsigned)(key >> 32) >= floor_half && (key & mask) == prefix)
        atomicAdd(&sm.hist[(unsigned)(key >> shift) & (RADIX_BINS - 1)], 1u);
    }
    __syncthreads();
    choose_digit(sm, want);
    prefix |= (unsigned long long)sm.digit << shift;
    mask |= (unsigned long long)(RADIX_BINS - 1) << shift;
    want -= sm.above;
    /* Keys are unique, so the last pass always ends here. */
    if ((unsigned)sm.count == want || shift == 0)
      break;
  }
  /* Exactly `need' keys have (key & mask) >= prefix: rank them. */
  __syncthreads();
  if (t == 0)
    sm.count = 0;
  __syncthreads();
  for (int b = t; b < n; b += SELECT_THREADS) {
    unsigned long long key = KEY_OF(b);
    if ((key & mask) >= prefix) {
      int slot = atomicAdd(&sm.count, 1);
      if (slot < M3IDX_TOPK)
        sm.keys[slot] = key;
    }
  }
#undef KEY_OF
#undef HALF_OF
  __syncthreads();
  if (t < need) {
    unsigned long long k = sm.keys[t];
    int rank = 0;
    for (int j = 0; j < need; j++)
      rank += sm.keys[j] > k;
    out[rank] = m3idx__rank_key_id(k);
  } else if (t < M3IDX_TOPK) {
    out[t] = -1;
  }
}

#endif /* M3IDX_GPU_SELECT_ROW_H */
