/*
 * score-prefill.hip - ragged prefill scoring with context, as a tiled
 * product: a block of threads scores one page (128 keys) against a tile
 * of 64 (row, head) pairs, request by request when a tile spans requests.
 * Scale group by scale group, the group's 32 elements of the 128 keys and
 * of the 64 queries are decoded once into shared memory; each thread then
 * owns 8 keys x 8 pairs and runs their 64 sums side by side, each in
 * element order as SPEC section 4 fixes.  The scaled group sums are added
 * as (s0 + s1) + (s2 + s3): s0 + s1 waits in shared memory (each thread
 * its own slots) while s2 + s3 is summed, so that a thread holds two
 * tiles of registers, not three.  The block maximum goes through
 * butterflies of distance 1, 2 and 4 (within any warp width) and shared
 * memory.
 *
 * SPDX-License-Identifier: MIT
 */
#include "score-core.h"

#define PF_THREADS 128 /* 3 blocks an SM (168 registers; 2 blocks: 42.6%, 3: 46.7%) */
#define PF_PAIRS 64 /* (row, head) pairs of a tile */
#define PF_KP 8     /* keys of a thread: 4 at 4 kg, 4 at 64 + 4 kg */
#define PF_PP 8     /* pairs of a thread: 4 at 4 rg, 4 at 32 + 4 rg */
#define PF_OUT (PF_KP * PF_PP)

struct prefill_smem {
  float k[32][128];           /* the group's elements of every key: [element][key] */
  float q[32][PF_PAIRS];      /* the group's query elements: [element][pair] */
  float sc[128];              /* the group's scale of every key */
  float s01[PF_OUT][PF_THREADS]; /* s0 + s1 of each thread's outputs */
  float red[2][PF_PAIRS];
  int req[PF_PAIRS], pos[PF_PAIRS];
  uint32_t starts[PF_PAIRS / 32]; /* bit i: pair i begins a segment */
  int seg_req[PF_PAIRS], seg_diagonal[PF_PAIRS]; /* the tile's segments for block b */
};

/* Stage scale group g of the page and of the tile's queries; nonzero
 * (from every thread) when a staged query element is beyond 2^125, so
 * that the group's sums must be unfused.  Holds a barrier. */
M3IDX_DEV int stage_group(const gpu_call &c, prefill_smem &sm, const uint8_t *page, int pair0,
                          int npairs, int g) {
  const int t = threadIdx.x;
  {
    const uint4 raw = *(const uint4 *)(page + 64 * t + 16 * g); /* key t */
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
      float v[8];
      e2m1_word(w[i], v);
#pragma unroll
      for (int e = 0; e < 8; e++)
        sm.k[8 * i + e][t] = v[e];
    }
    sm.sc[t] = e8m0_f(page[8192 + 4 * t + g]);
  }
  const int pair = t & (PF_PAIRS - 1), half = t / PF_PAIRS; /* a warp: 32 pairs, one bank each */
  float v[16];
#pragma unroll
  for (int i = 0; i < 16; i++)
    v[i] = 0.0f;
  if (pair0 + pair < npairs) {
    const long long base = (long long)(pair0 + pair) * 128 + 32 * g + 16 * half;
    if (c.dtype == 1) {
      const uint4 *x = (const uint4 *)((const uint16_t *)c.query + base);
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const uint4 y = x[h];
        const uint32_t w[4] = {y.x, y.y, y.z, y.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
          v[8 * h + 2 * i] = bits_f(w[i] << 16);
          v[8 * h + 2 * i + 1] = bits_f(w[i] & 0xffff0000u);
        }
      }
    } else {
      const uint4 y = *(const uint4 *)((const uint8_t *)c.query + base);
      const uint32_t w[4] = {y.x, y.y, y.z, y.w};
#pragma unroll
      for (int i = 0; i < 16; i++)
        v[i] = e4m3_f((uint8_t)(w[i / 4] >> (8 * (i % 4))));
    }
  }
  int big = 0;
#pragma unroll
  for (int i = 0; i < 16; i++) {
    big |= v[i] > 0x1p125f || v[i] < -0x1p125f;
    sm.q[16 * half + i][pair] = v[i];
  }
  return __syncthreads_or(big);
}

/* acc[k][p] = sum over the group's 32 elements, in order, of q * key. */
template <bool FUSED>
M3IDX_DEV void group_sums(const prefill_smem &sm, int kg, int rg, float (&acc)[PF_KP][PF_PP]) {
#pragma unroll
  for (int k = 0; k < PF_KP; k++)
#pragma unroll
    for (int p = 0; p < PF_PP; p++)
      acc[k][p] = 0.0f;
#pragma unroll 16 /* the fastest of 4, 8, 16 and 32 (TUNING-NOTES) */
  for (int j = 0; j < 32; j++) {
    const float4 ka = *(const float4 *)&sm.k[j][4 * kg];
    const float4 kb = *(const float4 *)&sm.k[j][64 + 4 * kg];
    const float4 qa = *(const float4 *)&sm.q[j][4 * rg];
    const float4 qb = *(const float4 *)&sm.q[j][32 + 4 * rg];
    const float kk[PF_KP] = {ka.x, ka.y, ka.z, ka.w, kb.x, kb.y, kb.z, kb.w};
    const float qq[PF_PP] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};
#pragma unroll
    for (int k = 0; k < PF_KP; k++)
#pragma unroll
      for (int p = 0; p < PF_PP; p++)
        acc[k][p] = add_product<FUSED>(acc[k][p], qq[p], kk[k]);
  }
}

M3IDX_DEV int key_of(int kg, int k) { return k < 4 ? 4 * kg + k : 64 + 4 * kg + (k - 4); }
M3IDX_DEV int pair_of(int rg, int p) { return p < 4 ? 4 * rg + p : 32 + 4 * rg + (p - 4); }

/* Block b against the tile's pairs of request r (those that see it). */
M3IDX_DEV void score_segment(const gpu_call &c, prefill_smem &sm, const uint8_t *page, int b,
                             int r, int pair0, int npairs, int diagonal) {
  const int t = threadIdx.x, w = t >> 5, l = t & 31;
  const int kg = (w & 1) * 8 + (l & 7), rg = (w >> 1) * 4 + (l >> 3);
  float sum[PF_KP][PF_PP], acc[PF_KP][PF_PP];
#pragma unroll 1
  for (int g = 0; g < 4; g++) {
    __syncthreads(); /* the previous group's readers are done */
    if (stage_group(c, sm, page, pair0, npairs, g))
      group_sums<false>(sm, kg, rg, acc);
    else
      group_sums<true>(sm, kg, rg, acc);
    /* sum = s_g for even g, s_(g-1) + s_g for odd g */
#pragma unroll
    for (int k = 0; k < PF_KP; k++) {
      const float sc = sm.sc[key_of(kg, k)];
#pragma unroll
      for (int p = 0; p < PF_PP; p++) {
        const float x = acc[k][p] * sc;
        sum[k][p] = (g & 1) ? sum[k][p] + x : x;
      }
    }
    if (g == 1)
#pragma unroll
      for (int k = 0; k < PF_KP; k++)
#pragma unroll
        for (int p = 0; p < PF_PP; p++)
          sm.s01[PF_PP * k + p][t] = sum[k][p];
  }
  float best[PF_PP];
#pragma unroll
  for (int p = 0; p < PF_PP; p++) {
    const int pp = pair_of(rg, p), pos = sm.pos[pp];
    const int sees = sm.req[pp] == r && pos >= b * 128;
    best[p] = nan_f();
#pragma unroll
    for (int k = 0; k < PF_KP; k++) {
      const float logit = (sm.s01[PF_PP * k + p][t] + sum[k][p]) * c.scale + 0.0f; /* -0 counts as +0 */
      if (!diagonal || b * 128 + key_of(kg, k) <= pos)
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
      sm.red[w & 1][pair_of(rg, p)] = best[p];
  __syncthreads();
  if (t < PF_PAIRS && sm.req[t] == r && sm.pos[t] >= b * 128) {
    const float v = fmaxf(sm.red[0][t], sm.red[1][t]);
    const int pair = pair0 + t;
    store_score(c, pair % c.num_heads, pair / c.num_heads, b, v);
  }
}

__global__ void __launch_bounds__(PF_THREADS, 3) score_prefill_kernel(gpu_call c, int ntiles) {
  extern __shared__ float4 prefill_dynamic[]; /* over the 48 KB of static shared memory */
  prefill_smem &sm = *(prefill_smem *)prefill_dynamic;
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
    if (t < PF_PAIRS / 32)
      sm.starts[t] = 0u;
    __syncthreads();
    /* Rows are request-major and a request's rows sit at increasing
       positions, so the pairs of a request that see block b are one run
       (a segment) whose first pair has the least position: each pair
       knows whether it begins one, and its index counts the beginnings
       before it. */
    int begins = 0;
    if (t < PF_PAIRS) {
      const int lo = b * 128, sees = sm.pos[t] >= lo;
      begins = sees && (t == 0 || sm.req[t - 1] != sm.req[t] || sm.pos[t - 1] < lo);
      if (begins)
        atomicOr(&sm.starts[t / 32], 1u << (t % 32));
    }
    __syncthreads();
    int nseg = 0, before = 0;
    for (int i = 0; i < PF_PAIRS / 32; i++) {
      nseg += __popc(sm.starts[i]);
      before += __popc(i < t / 32 ? sm.starts[i] : i == t / 32 ? sm.starts[i] & ((1u << (t % 32)) - 1u) : 0u);
    }
    if (begins) {
      sm.seg_req[before] = sm.req[t];
      sm.seg_diagonal[before] = sm.pos[t] < b * 128 + 127; /* a row sees only part of block b */
    }
    __syncthreads();
    for (int i = 0; i < nseg; i++) {
      const int r = sm.seg_req[i];
      const uint8_t *page = page_of(c, r, b);
      if (page != nullptr)
        score_segment(c, sm, page, b, r, pair0, npairs, sm.seg_diagonal[i]);
    }
  }
}

hipError_t m3idx_gpu_score_prefill_setup(void) {
  return m3idx_allow_shared<sizeof(prefill_smem)>((const void *)score_prefill_kernel);
}

hipError_t m3idx_gpu_score_prefill(const struct gpu_call *c, hipStream_t s) {
  if (c->num_rows == 0)
    return hipSuccess;
  const int ntiles = (int)(((long long)c->num_rows * c->num_heads + PF_PAIRS - 1) / PF_PAIRS);
  dim3 grid(c->width, ntiles < 65535 ? ntiles : 65535);
  hipLaunchKernelGGL(score_prefill_kernel, grid, dim3(PF_THREADS), sizeof(prefill_smem), s, *c,
                     ntiles);
  return hipGetLastError();
}
