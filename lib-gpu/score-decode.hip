/*
 * score-decode.hip - decode scoring driven by the work map (SPEC section 9)
 * for calls with several (row, head) pairs per request (query_len > 1 or
 * several heads; score-decode-one.hip has the kernel for one).
 *
 * The grid is fixed by the map's capacity (graph-stable), unused entries
 * skipped: block of threads `part' of an entry takes the entry's blocks
 * part, part + ENTRY_SPLIT, ..., shared among its groups of 32 threads,
 * each of which scores whole pages with no barrier between them.  Teams of
 * 4 lanes own a key, lane g its scale group g (as in score-core.h): the
 * lane decodes its 32 e2m1 elements of two keys at once, through the
 * shared byte table, and runs the in-order sums of the pass's pairs
 * against them side by side, the queries read from shared memory; the
 * team adds the scaled group sums as (s0 + s1) + (s2 + s3) through
 * butterflies of distance 1 and 2, and the page maximum of each pair
 * goes through butterflies of distance 4, 8 and 16, inside any warp
 * width.  A pass takes NP = 2, 4 or 8 pairs (the kernel is built for
 * each).
 *
 * SPDX-License-Identifier: MIT
 */
#include "score-core.h"
#include "work-map.h"

#define ENTRY_SPLIT 2 /* the fastest of 1, 2 and 4 (TUNING-NOTES) */
#define GROUPS (SCORE_THREADS / 32)
#define PASS_PAIRS 8 /* the most pairs of a pass */

struct decode_smem {
  score_smem table;
  float q[PASS_PAIRS][4][36]; /* the pass's queries as fp32, [pair][group][element]:
                                 rows of 36, so that the 4 groups of a team read 4 banks apart */
};

/* Stage pairs p0 .. p0 + n - 1 of request r (pair k = j * H + h), zeros
 * for the pass's other np - n.  Every thread calls it (it holds
 * barriers); nonzero, for every thread, when an element is beyond 2^125:
 * the pass's sums are then unfused (the same bits for the other pairs). */
M3IDX_DEV int stage_pass(const gpu_call &c, decode_smem &sm, int r, int p0, int n, int np) {
  const int t = threadIdx.x, npairs = c.query_len * c.num_heads;
  __syncthreads(); /* the previous pass's readers are done */
  int big = 0;
  for (int e = 8 * t; e < 128 * np; e += 8 * SCORE_THREADS) {
    const int p = e / 128, d = e % 128;
    float v[8];
#pragma unroll
    for (int i = 0; i < 8; i++)
      v[i] = 0.0f;
    if (p < n)
      big |= query8(c, ((long long)r * npairs + p0 + p) * 128 + d, v);
#pragma unroll
    for (int i = 0; i < 8; i++)
      sm.q[p][d / 32][d % 32 + i] = v[i];
  }
  return __syncthreads_or(big);
}

/* The 32 elements of this lane's group of a key, as fp32. */
M3IDX_DEV void decode_group(lut_column col, const uint4 &d, float (&kf)[32]) {
  const uint32_t w[4] = {d.x, d.y, d.z, d.w};
#pragma unroll
  for (int ww = 0; ww < 4; ww++)
#pragma unroll
    for (int bb = 0; bb < 4; bb++) {
      const float2 x = lut_at(col, byte_of(w[ww], bb));
      kf[8 * ww + 2 * bb] = x.x;
      kf[8 * ww + 2 * bb + 1] = x.y;
    }
}

/* a0[p], a1[p] = sums over group g's 32 elements, in order, of q_p * key,
 * for two keys at once (each query load serves both). */
template <int NP, bool FUSED>
M3IDX_DEV void pair_sums2(const decode_smem &sm, int g, const float (&k0)[32],
                          const float (&k1)[32], float (&a0)[NP], float (&a1)[NP]) {
#pragma unroll
  for (int p = 0; p < NP; p++) {
    a0[p] = 0.0f;
    a1[p] = 0.0f;
  }
#pragma unroll
  for (int i = 0; i < 8; i++)
#pragma unroll
    for (int p = 0; p < NP; p++) {
      const float4 q = *(const float4 *)&sm.q[p][g][4 * i];
      const float qq[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int e = 0; e < 4; e++) {
        a0[p] = add_product<FUSED>(a0[p], qq[e], k0[4 * i + e]);
        a1[p] = add_product<FUSED>(a1[p], qq[e], k1[4 * i + e]);
      }
    }
}

/* 8 pairs hold 164 registers: 3 blocks an SM (with 4 they would spill). */
template <int NP>
__global__ void __launch_bounds__(SCORE_THREADS, NP > 4 ? 3 : 4)
score_decode_kernel(gpu_call c, const int32_t *map, int capacity) {
  __shared__ decode_smem sm;
  const int t = threadIdx.x, lane = t & 31, group = t >> 5, team = lane >> 2, g = lane & 3;
  int r, s, b0, count;
  if (map_entry(c, map, blockIdx.x / ENTRY_SPLIT, &r, &s, &b0, &count) <= 0)
    return;
  const int part = blockIdx.x % ENTRY_SPLIT;
  if (part >= count)
    return;
  fill_lut(sm.table);
  const lut_column col = lut_column_of(sm.table);
  const int H = c.num_heads, npairs = c.query_len * H, end = b0 + count;
  const int first = b0 + part + ENTRY_SPLIT * group, stride = ENTRY_SPLIT * GROUPS;
  for (int p0 = 0; p0 < npairs; p0 += NP) {
    const int n = min(NP, npairs - p0);
    const int unfused = stage_pass(c, sm, r, p0, n, NP);
    int pos[NP]; /* the pass's rows' positions; -1: no such pair */
#pragma unroll
    for (int p = 0; p < NP; p++)
      pos[p] = p < n ? s - c.query_len + (p0 + p) / H : -1;
    for (int b = first; b < end; b += stride) {
      const uint8_t *page = page_of(c, r, b);
      if (page == nullptr)
        continue;
      float best[NP];
#pragma unroll
      for (int p = 0; p < NP; p++)
        best[p] = nan_f();
      /* This lane's 16 keys, team + 8 i, two at a time, loaded while the two before are summed. */
      uint4 d0 = *(const uint4 *)(page + 64 * team + 16 * g);
      uint4 d1 = *(const uint4 *)(page + 64 * (team + 8) + 16 * g);
      uint32_t e0 = page[8192 + 4 * team + g], e1 = page[8192 + 4 * (team + 8) + g];
#pragma unroll 1
      for (int i = 0; i < 16; i += 2) {
        const int key = team + 8 * i;
        float k0[32], k1[32];
        decode_group(col, d0, k0);
        decode_group(col, d1, k1);
        const float sc0 = e8m0_f(e0), sc1 = e8m0_f(e1);
        if (i < 14) {
          d0 = *(const uint4 *)(page + 64 * (key + 16) + 16 * g);
          d1 = *(const uint4 *)(page + 64 * (key + 24) + 16 * g);
          e0 = page[8192 + 4 * (key + 16) + g];
          e1 = page[8192 + 4 * (key + 24) + g];
        }
        float a0[NP], a1[NP];
        if (unfused)
          pair_sums2<NP, false>(sm, g, k0, k1, a0, a1);
        else
          pair_sums2<NP, true>(sm, g, k0, k1, a0, a1);
#pragma unroll
        for (int p = 0; p < NP; p++)
#pragma unroll
          for (int h = 0; h < 2; h++) {
            const float sg = (h ? a1[p] : a0[p]) * (h ? sc1 : sc0);
            const float s01 = sg + M3IDX_SHFL_XOR(sg, 1);
            const float dot = s01 + M3IDX_SHFL_XOR(s01, 2);
            const float logit = dot * c.scale + 0.0f; /* -0 counts as +0 */
            if (b * 128 + key + 8 * h <= pos[p])
              best[p] = fmaxf(best[p], logit); /* NaN-ignoring */
          }
      }
#pragma unroll
      for (int p = 0; p < NP; p++) {
        if (b * 128 > pos[p])
          continue; /* no such pair, or its row does not see block b: the same for the group */
        float v = best[p];
        for (int m = 4; m < 32; m <<= 1)
          v = fmaxf(v, M3IDX_SHFL_XOR(v, m));
        if (lane == 0)
          store_score(c, (p0 + p) % H, r * c.query_len + (p0 + p) / H, b, v);
      }
    }
  }
}

hipError_t m3idx_gpu_score_decode(const struct gpu_call *c, const int32_t *map, int capacity,
                                  hipStream_t s) {
  if (capacity <= 0)
    return hipSuccess;
  const int npairs = c->query_len * c->num_heads;
  if (npairs == 1)
    return m3idx_gpu_score_decode_one(c, map, capacity, s);
  const dim3 grid((unsigned)capacity * ENTRY_SPLIT), block(SCORE_THREADS);
  if (npairs == 2)
    hipLaunchKernelGGL(score_decode_kernel<2>, grid, block, 0, s, *c, map, capacity);
  else if (npairs <= 4)
    hipLaunchKernelGGL(score_decode_kernel<4>, grid, block, 0, s, *c, map, capacity);
  else
    hipLaunchKernelGGL(score_decode_kernel<PASS_PAIRS>, grid, block, 0, s, *c, map, capacity);
  return hipGetLastError();
}
