/*
 * score-decode-one.hip - decode scoring when a call has one (row, head)
 * per request (query_len 1, one index head: the model's decode step), the
 * case that must stream pages at memory speed.
 *
 * Each group of 32 threads scores whole pages on its own, with no barrier
 * between pages: teams of 4 lanes own a key, lane g its scale group g (as
 * in score-core.h), 8 keys of the team at a time while the next 8 are on
 * their way; the team's 4 lanes then finish one of each 4 keys each (team_dots), and
 * the page maximum goes through butterflies of distance 1 to 16, inside
 * any warp width.  The query stays in registers.  A block fills its
 * table once and takes work-map entries blockIdx.x, + gridDim.x, ...,
 * its groups every 4th of an entry's blocks; the grid is the map's
 * capacity or twice what stays resident on the device, the smaller
 * (fixed for a context, so graph replays see one grid: SPEC section 9),
 * so the table is filled once a block, not once an entry.  The figures
 * of this and of the variants dropped are in TUNING-NOTES.
 *
 * The e2m1 elements come from a table in shared memory.  On NVIDIA it is
 * a wide one (one_table below); AMD blocks keep score-core.h's 32 KB one,
 * as a 64 KB table would leave gfx90a and gfx94x one block a CU.
 *
 * SPDX-License-Identifier: MIT
 */
#include "score-core.h"

#define ONE_GROUPS (SCORE_THREADS / 32)
#define STEP_KEYS 8 /* keys of a lane in flight at once */
#define STEPS (128 / (8 * STEP_KEYS))

#if defined(M3IDX_HIP_PLATFORM_NVIDIA)
/* Entry v (256 bytes at 256 v): the e2m1 pair of byte v (low nibble,
 * high nibble) as two floats in 16 columns (128 bytes: the two half-warps
 * of a 64-bit load never meet), then as two bf16 halves of one word in 32
 * columns (128 bytes).  A lane's address is then one byte permute: its
 * column's offset in byte 0 and the key byte in byte 1, which the load's
 * immediate offsets by the table's place (a generic address converted to
 * the shared window would cost an add per lookup).  Half of a lane's
 * bytes are looked up as float pairs and half as bf16 words: the first
 * load twice the bytes of shared memory, the second needs two more
 * instructions, and the mix balances the two. */
struct one_table {
  uint4 chunk[256][16];
};
/* Bit 4 w + b set: byte b of a lane's word w is looked up as a bf16
 * word (the masks tried are in TUNING-NOTES). */
#define ONE_BF16_BYTES 0xaaaa

M3IDX_DEV void fill_table(one_table &sm) {
  /* Thread t fills chunk t % 16 of entries t / 16 + U i: 16 / U low
     nibbles, and each high nibble in turn. */
  constexpr int U = SCORE_THREADS / 16;
  static_assert(16 % U == 0, "a thread's low nibbles repeat");
  const int ch = threadIdx.x & 15, u = threadIdx.x >> 4;
  uint32_t lo[16 / U];
#pragma unroll
  for (int j = 0; j < 16 / U; j++)
    lo[j] = f_bits(e2m1_f((uint32_t)(u + U * j)));
#pragma unroll
  for (int hi = 0; hi < 16; hi++) {
    const uint32_t h = f_bits(e2m1_f((uint32_t)hi));
#pragma unroll
    for (int j = 0; j < 16 / U; j++) {
      const uint32_t p = (h & 0xffff0000u) | (lo[j] >> 16);
      const uint32_t x = ch < 8 ? lo[j] : p, y = ch < 8 ? h : p;
      sm.chunk[16 * hi + u + U * j][ch] = make_uint4(x, y, x, y);
    }
  }
}

/* Sum of one lane's 32 products in element order, as group_sum does. */
template <bool FUSED>
M3IDX_DEV float table_sum(const one_table &sm, const uint4 &d, const float *q32) {
  const char *base = (const char *)&sm.chunk[0][0];
  const uint32_t pairs = 8u * (threadIdx.x & 15u), words = 128u + 4u * (threadIdx.x & 31u);
  const uint32_t w[4] = {d.x, d.y, d.z, d.w};
  float acc = 0.0f;
#pragma unroll
  for (int ww = 0; ww < 4; ww++)
#pragma unroll
    for (int bb = 0; bb < 4; bb++) {
      const uint32_t sel = 0x5504u + 16u * bb; /* byte 0 from the column, byte 1 the key's */
      float2 x;
      if ((ONE_BF16_BYTES >> (4 * ww + bb)) & 1) {
        const uint32_t p = *(const uint32_t *)(base + __byte_perm(w[ww], words, sel));
        x = make_float2(bits_f(p << 16), bits_f(p & 0xffff0000u));
      } else {
        x = *(const float2 *)(base + __byte_perm(w[ww], pairs, sel));
      }
      const float q0 = q32[8 * ww + 2 * bb], q1 = q32[8 * ww + 2 * bb + 1];
      acc = add_product<FUSED>(acc, q0, x.x);
      acc = add_product<FUSED>(acc, q1, x.y);
    }
  return acc;
}
#else
typedef score_smem one_table;
M3IDX_DEV void fill_table(one_table &sm) { fill_lut(sm); }
template <bool FUSED>
M3IDX_DEV float table_sum(const one_table &sm, const uint4 &d, const float *q32) {
  return group_sum<FUSED>(sm, d, q32);
}
#endif

/* A lane's share of one step of a page: its group's 16 bytes of
 * STEP_KEYS keys, and lane l the scale word of key 32 i + l of the step
 * (one 128-byte load a warp, where a byte a key took four). */
struct step_regs {
  uint4 d[STEP_KEYS];
  uint32_t scales[STEP_KEYS / 4];
};

M3IDX_DEV int step_key(int team, int step, int k) { return team + 8 * (STEP_KEYS * step + k); }

/* 16 bytes of a page: read once, so on NVIDIA they take no place in L1
 * (the table's shared memory shares it). */
M3IDX_DEV uint4 load_once16(const uint8_t *p) {
#if defined(M3IDX_HIP_PLATFORM_NVIDIA)
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
#else
  return *(const uint4 *)p;
#endif
}

M3IDX_DEV void load_step(const uint8_t *page, int step, int team, int g, step_regs &x) {
#pragma unroll
  for (int k = 0; k < STEP_KEYS; k++)
    x.d[k] = load_once16(page + 64 * step_key(team, step, k) + 16 * g);
#pragma unroll
  for (int i = 0; i < STEP_KEYS / 4; i++)
    x.scales[i] = *(const uint32_t *)(page + 8192 + 4 * (8 * STEP_KEYS * step + 32 * i + 4 * team + g));
}

/* The dot product of key 4 i + k of the step for lane k of the team, from
 * the team's group sums gs of keys 4 i .. 4 i + 3: lane g holds group g of
 * the 4 keys, and fetches its scale bytes from the lanes that loaded them.
 * The team transposes the scaled sums in two exchanges, adding as it
 * goes: after the first (distance 1) a lane holds s_g + s_(g^1) of the
 * keys with its parity, after the second (distance 2) it adds the other
 * pair's sum of its own key.  Addition commutes, so every key gets
 * (s0 + s1) + (s2 + s3) bit for bit; 3 shuffles instead of 8. */
M3IDX_DEV float team_dots(const float *gs, uint32_t scales, int team, int g) {
  float sg[4];
#pragma unroll
  for (int k = 0; k < 4; k++)
    sg[k] = gs[k] * e8m0_f((M3IDX_SHFL32(scales, team + 8 * k) >> (8 * g)) & 0xffu);
  const int odd = g & 1, high = g >> 1;
  /* keys odd and 2 + odd stay; the partner's group of them comes in */
  const float a = (odd ? sg[1] : sg[0]) + M3IDX_SHFL_XOR(odd ? sg[0] : sg[1], 1);
  const float b = (odd ? sg[3] : sg[2]) + M3IDX_SHFL_XOR(odd ? sg[2] : sg[3], 1);
  /* key g = odd + 2 high stays; the other pair's sum of it comes in */
  return (high ? b : a) + M3IDX_SHFL_XOR(high ? a : b, 2);
}

/* best, with the logits of the step's causal keys: the step's keys
 * begin at key0 (its key k for a team is key0 + step_key(team, 0, k)),
 * and lane g of a team finishes key 4 i + g of each 4. */
template <bool FUSED>
M3IDX_DEV float step_best(const one_table &sm, const step_regs &x, const float *q32, int team,
                          int g, const gpu_call &c, int key0, int pos, float best) {
  float gs[STEP_KEYS];
#pragma unroll
  for (int k = 0; k < STEP_KEYS; k++)
    gs[k] = table_sum<FUSED>(sm, x.d[k], q32);
#pragma unroll
  for (int i = 0; i < STEP_KEYS / 4; i++) {
    const float logit = team_dots(gs + 4 * i, x.scales[i], team, g) * c.scale + 0.0f; /* -0 is +0 */
    if (key0 + team + 8 * (4 * i + g) <= pos)
      best = fmaxf(best, logit); /* NaN-ignoring */
  }
  return best;
}

/* Work-map entry e, by each group of the block on its own. */
M3IDX_DEV void score_entry(const one_table &sm, const gpu_call &c, const int32_t *map, int e) {
  const int t = threadIdx.x, lane = t & 31, group = t >> 5, team = lane >> 2, g = lane & 3;
  /* This group's first page id is asked for while the entry's request
     length is on its way, to overlap the two reads (read in bounds
     whatever the entry holds). */
  const int req = map[2 * e];
  const int id = req >= 0 && req < c.num_reqs
                     ? block_table_at(c, req, (map[2 * e + 1] & M3IDX_WORK_FIRST_MASK) + group)
                     : -1;
  int r, s, b0, count;
  if (map_entry(c, map, e, &r, &s, &b0, &count) <= 0)
    return;
  const int pos = s - 1, end = b0 + count;
  /* This group's pages: b = group, group + ONE_GROUPS, ... from b0, each
     in STEPS steps. */
  const uint8_t *page = b0 + group < end ? page_with_id(c, id) : nullptr;
  step_regs cur, nxt;
  if (page)
    load_step(page, 0, team, g, cur);
  float q[32];
  int unfused;
  load_query(c, r, 0, q, &unfused); /* row r: query_len 1 */
  /* The page after this one, asked for a page ahead. */
  const int second = b0 + group + ONE_GROUPS;
  const uint8_t *after = second < end ? page_of(c, r, second) : nullptr;
  float best = nan_f();
  for (int b = b0 + group; b < end;) {
#pragma unroll
    for (int step = 0; step < STEPS; step++) {
      /* What comes next: the next step of this page, or the next page's first. */
      const uint8_t *np = page;
      int nstep = step + 1, nb = b;
      if (nstep == STEPS) {
        nstep = 0;
        nb = b + ONE_GROUPS;
        np = after;
      }
      if (np)
        load_step(np, nstep, team, g, nxt);
      if (page) {
        const int key0 = b * 128 + 8 * STEP_KEYS * step;
        best = unfused ? step_best<false>(sm, cur, q, team, g, c, key0, pos, best)
                       : step_best<true>(sm, cur, q, team, g, c, key0, pos, best);
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
        after = nb + ONE_GROUPS < end ? page_of(c, r, nb + ONE_GROUPS) : nullptr;
      }
      cur = nxt;
    }
  }
}

__global__ void __launch_bounds__(SCORE_THREADS, 3)
score_decode_one_kernel(gpu_call c, const int32_t *map, int entries) {
  extern __shared__ float4 one_dynamic[];
  one_table &sm = *(one_table *)one_dynamic;
  fill_table(sm);
  __syncthreads();
  for (int e = blockIdx.x; e < entries; e += gridDim.x)
    score_entry(sm, c, map, e);
}

hipError_t m3idx_gpu_score_decode_one_setup(int *grid) {
  hipError_t e = m3idx_allow_shared<sizeof(one_table)>((const void *)score_decode_one_kernel);
  int per_sm = 0, dev = 0;
  hipDeviceProp_t p;
  if (e == hipSuccess)
    e = hipOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, (const void *)score_decode_one_kernel, SCORE_THREADS, sizeof(one_table));
  if (e == hipSuccess)
    e = hipGetDevice(&dev);
  if (e == hipSuccess)
    e = hipGetDeviceProperties(&p, dev);
  *grid = e == hipSuccess && per_sm > 0 ? 2 * per_sm * p.multiProcessorCount : 1;
  return e;
}

hipError_t m3idx_gpu_score_decode_one(const struct gpu_call *c, const int32_t *map,
                                      int capacity, hipStream_t s) {
  const int grid = capacity < c->one_grid ? capacity : c->one_grid;
  hipLaunchKernelGGL(score_decode_one_kernel, dim3((unsigned)grid), dim3(SCORE_THREADS),
                     sizeof(one_table), s, *c, map, capacity);
  return hipGetLastError();
}
