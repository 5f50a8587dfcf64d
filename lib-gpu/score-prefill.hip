/*
 * score-prefill.hip - ragged prefill scoring with context, as a tiled
 * product: a block of threads scores one page (128 keys) against a tile
 * of 64 (row, head) pairs, request by request when a tile spans requests.
 * Scale group by scale group, the group's 32 elements of the 128 keys and
 * of the 64 queries are decoded once into shared memory; each thread then
 * owns 4 keys x 8 pairs and runs their 32 sums side by side, each in
 * element order as SPEC section 4 fixes, then adds the scaled group sums
 * as (s0 + s1) + (s2 + s3).  The block maximum goes through butterflies
 * of distance 1, 2 and 4 (within any warp width) and shared memory.
 *
 * SPDX-License-Identifier: MIT
 */
#include "score-core.h"

#define PF_THREADS 256
#define PF_PAIRS 64 /* (row, head) pairs of a tile */
#define PF_KP 4     /* keys of a thread */
#define PF_PP 8     /* pairs of a thread */

struct prefill_smem {
  float k[32][128]; /* the group's elements of every key: [element][key] */
  float q[32][PF_PAIRS]; /* the group's query elements: [element][pair] */
  float sc[128];    /* the group's scale of every key */
  float red[4][PF_PAIRS];
  int req[PF_PAIRS], pos[PF_PAIRS];
  int huge[4];      /* a query element of group g beyond 2^125: unfused */
  int nseg, seg_req[PF_PAIRS], seg_diagonal[PF_PAIRS]; /* the tile's segments for block b */
};

/* Stage scale group g of the page and of the tile's queries. */
M3IDX_DEV void stage_group(const gpu_call &c, prefill_smem &sm, const uint8_t *page, int pair0,
                           int npairs, int g) {
  const int t = threadIdx.x;
  {
    const int key = t & 127, half = t >> 7;
    const uint2 raw = *(const uint2 *)(page + 64 * key + 16 * g + 8 * half);
    float v[8];
    e2m1_word(raw.x, v);
#pragma unroll
    for (int i = 0; i < 8; i++)
      sm.k[16 * half + i][key] = v[i];
    e2m1_word(raw.y, v);
#pragma unroll
    for (int i = 0; i < 8; i++)
      sm.k[16 * half + 8 + i][key] = v[i];
  }
  if (t < 128)
    sm.sc[t] = e8m0_f(page[8192 + 4 * t + g]);
  const int pair = t & (PF_PAIRS - 1), quarter = t / PF_PAIRS; /* a warp: 32 pairs, one bank each */
  float v[8];
#pragma unroll
  for (int i = 0; i < 8; i++)
    v[i] = 0.0f;
  if (pair0 + pair < npairs) {
    const long long base = (long long)(pair0 + pair) * 128 + 32 * g + 8 * quarter;
    if (c.dtype == 1) {
      const uint4 x = *(const uint4 *)((const uint16_t *)c.query + base);
      const uint32_t w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
      for (int i = 0; i < 4; i++) {
        v[2 * i] = bits_f(w[i] << 16);
        v[2 * i + 1] = bits_f(w[i] & 0xffff0000u);
      }
    } else {
      const uint2 x = *(const uint2 *)((const uint8_t *)c.query + base);
#pragma unroll
      for (int i = 0; i < 8; i++)
        v[i] = e4m3_f((uint8_t)((i < 4 ? x.x : x.y) >> (8 * (i % 4))));
    }
  }
  int big = 0;
#pragma unroll
  for (int i = 0; i < 8; i++) {
    big |= v[i] > 0x1p125f || v[i] < -0x1p125f;
    sm.q[8 * quarter + i][pair] = v[i];
  }
  if (big)
    sm.huge[g] = 1;
}

/* acc[k][p] = sum over the group's 32 elements, in order, of q * key. */
template <bool FUSED>
M3IDX_DEV void group_sums(const prefill_smem &sm, int kg, int rg, float (&acc)[PF_KP][PF_PP]) {
#pragma unroll
  for (int k = 0; k < PF_KP; k++)
#pragma unroll
    for (int p = 0; p < PF_PP; p++)
      acc[k][p] = 0.0f;
#pragma unroll 4
  for (int j = 0; j < 32; j++) {
    const float4 kv = *(const float4 *)&sm.k[j][PF_KP * kg];
    const float4 qa = *(const float4 *)&sm.q[j][PF_PP * rg];
    const float4 qb = *(const float4 *)&sm.q[j][PF_PP * rg + 4];
    const float kk[PF_KP] = {kv.x, kv.y, kv.z, kv.w};
    const float qq[PF_PP] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};
#pragma unroll
    for (int k = 0; k < PF_KP; k++)
#pragma unroll
      for (int p = 0; p < PF_PP; p++) {
        if (FUSED) {
          acc[k][p] = fmaf(qq[p], kk[k], acc[k][p]);
        } else {
          float x = qq[p] * kk[k];
          acc[k][p] = acc[k][p] + x;
        }
      }
  }
}

/* Groups 2h and 2h + 1: tsum = s_2h + s_2h+1, each s = (its sums) * scale. */
M3IDX_DEV void half_sums(const gpu_call &c, prefill_smem &sm, const uint8_t *page, int pair0,
                         int npairs, int h, int kg, int rg, float (&tsum)[PF_KP][PF_PP]) {
  float acc[PF_KP][PF_PP];
#pragma unroll
  for (int gg = 0; gg < 2; gg++) {
    const int g = 2 * h + gg;
    __syncthreads(); /* the previous group's readers are done */
    stage_group(c, sm, page, pair0, npairs, g);
    __syncthreads();
    if (!sm.huge[g])
      group_sums<true>(sm, kg, rg, acc);
    else
      group_sums<false>(sm, kg, rg, acc);
#pragma unroll
    for (int k = 0; k < PF_KP; k++) {
      const float sc = sm.sc[PF_KP * kg + k];
#pragma unroll
      for (int p = 0; p < PF_PP; p++) {
        const float x = acc[k][p] * sc;
        tsum[k][p] = gg == 0 ? x : tsum[k][p] + x;
      }
    }
  }
}

/* Block b against the tile's pairs of request r (those that see it). */
M3IDX_DEV void score_segment(const gpu_call &c, prefill_smem &sm, const uint8_t *page, int b,
                             int r, int pair0, int npairs, int diagonal) {
  const int t = threadIdx.x, w = t >> 5, l = t & 31;
  const int kg = (w & 3) * 8 + (l & 7), rg = (w >> 2) * 4 + (l >> 3);
  float s01[PF_KP][PF_PP], s23[PF_KP][PF_PP];
  if (t < 4)
    sm.huge[t] = 0;
#pragma unroll 1
  for (int h = 0; h < 2; h++) {
    half_sums(c, sm, page, pair0, npairs, h, kg, rg, s23);
    if (h == 0)
#pragma unroll
      for (int k = 0; k < PF_KP; k++)
#pragma unroll
        for (int p = 0; p < PF_PP; p++)
          s01[k][p] = s23[k][p];
  }
  float best[PF_PP];
#pragma unroll
  for (int p = 0; p < PF_PP; p++) {
    const int pp = PF_PP * rg + p, pos = sm.pos[pp];
    const int sees = sm.req[pp] == r && pos >= b * 128;
    best[p] = nan_f();
#pragma unroll
    for (int k = 0; k < PF_KP; k++) {
      const float logit = (s01[k][p] + s23[k][p]) * c.scale + 0.0f; /* -0 counts as +0 */
      if (!diagonal || b * 128 + PF_KP * kg + k <= pos)
        best[p] = fmaxf(best[p], logit); /* NaN-ignoring */
    }
    if (!sees)
      best[p] = nan_f();
#pragma unroll
    for (int m = 1; m < 8; m <<= 1)
      best[p] = fmaxf(best[p], M3IDX_SHFL_XOR(best[p], m));
  }
  if ((l & 7) == 0)
#pragma unroll
    for (int p = 0; p < PF_PP; p++)
      sm.red[w & 3][PF_PP * rg + p] = best[p];
  __syncthreads();
  if (t < PF_PAIRS && sm.req[t] == r && sm.pos[t] >= b * 128) {
    const float v = fmaxf(fmaxf(sm.red[0][t], sm.red[1][t]), fmaxf(sm.red[2][t], sm.red[3][t]));
    const int pair = pair0 + t;
    store_score(c, pair % c.num_heads, pair / c.num_heads, b, v);
  }
}

__global__ void __launch_bounds__(PF_THREADS, 2) score_prefill_kernel(gpu_call c, int ntiles) {
  __shared__ prefill_smem sm;
  const int b = blockIdx.x, t = threadIdx.x;
  const int npairs = c.num_rows * c.num_heads;
  for (int tile = blockIdx.y; tile < ntiles; tile += gridDim.y) {
    const int pair0 = tile * PF_PAIRS;
    __syncthreads(); /* the previous tile is done with sm */
    if (t < PF_PAIRS) {
      int r = -1, pos = -1;
      if (pair0 + t < npairs)
        pos = row_position(c, (pair0 + t) / c.num_heads, &r);
      sm.req[t] = r;
      sm.pos[t] = pos;
    }
    __syncthreads();
    /* Rows are request-major, so the pairs of a request that see block b
       are consecutive: one segment per request, listed by one thread. */
    if (t == 0) {
      int n = 0;
      for (int i = 0; i < PF_PAIRS;) {
        if (sm.pos[i] < b * 128) {
          i++;
          continue;
        }
        const int r = sm.req[i];
        int diagonal = 0; /* a row of the segment sees only part of block b */
        for (; i < PF_PAIRS && sm.req[i] == r; i++)
          diagonal |= sm.pos[i] >= b * 128 && sm.pos[i] < b * 128 + 127;
        sm.seg_req[n] = r;
        sm.seg_diagonal[n++] = diagonal;
      }
      sm.nseg = n;
    }
    __syncthreads();
    const int nseg = sm.nseg;
    for (int i = 0; i < nseg; i++) {
      const int r = sm.seg_req[i];
      const uint8_t *page = page_of(c, r, b);
      if (page != nullptr)
        score_segment(c, sm, page, b, r, pair0, npairs, sm.seg_diagonal[i]);
    }
  }
}

hipError_t m3idx_gpu_score_prefill(const struct gpu_call *c, hipStream_t s) {
  if (c->num_rows == 0)
    return hipSuccess;
  const int ntiles = (int)(((long long)c->num_rows * c->num_heads + PF_PAIRS - 1) / PF_PAIRS);
  dim3 grid(c->width, ntiles < 65535 ? ntiles : 65535);
  hipLaunchKernelGGL(score_prefill_kernel, grid, dim3(PF_THREADS), 0, s, *c, ntiles);
  return hipGetLastError();
}
