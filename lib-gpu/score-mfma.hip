/*
 * score-mfma.hip - decode with several pairs a request, and prefill, on
 * AMD's matrix cores (gfx90a, gfx942, gfx950): the tensor-core filter of
 * score-gemm.hip on int8 MFMA.
 *
 * A block holds 16 (row, head) pairs; each of its two wavefronts takes
 * pages in turn and runs 16 pairs by 16 keys by one group a step:
 * v_mfma_i32_16x16x32_i8 (gfx942, gfx950; two v_mfma_i32_16x16x16i8 on
 * gfx90a), s8 digits by s8 code values (halves, by v_perm_b32), the high
 * digit plane first, whose sum times 256 and the bits of 1.5 * 2^23 seed
 * the low plane's (lib/filter-cut.h's tensor-core form and bound).  Lane
 * L of a wavefront holds pair L % 16's digits and key L % 16's code word
 * L / 16 of each group (even codes, then odd: the same k order on both
 * sides), and receives pairs 4 (L / 16) .. + 3 against key L % 16; the
 * keys that pass are summed exactly as the other kernels do, a quad of
 * lanes a key.  No AMD GPU has run this file: the
 * self-check at context creation compares it with the plain row.
 *
 * SPDX-License-Identifier: MIT
 */
#include "gemm-parts.h"

#if !defined(M3IDX_HIP_PLATFORM_NVIDIA)

#if defined(__gfx90a__) || defined(__gfx942__) || defined(__gfx950__)
#define MFMA_TARGET 1
#endif

#define MFMA_BLOCKS 16 /* prefill: the key blocks a block streams for its pairs */

typedef int mfma_i32x4 __attribute__((ext_vector_type(4)));

struct mfma_smem {
  double e2m1[16];
  warp_query wq[16];
  float4 factor[2][128]; /* a wavefront's page: key_factors */
  float start[2][128];
  float width[2][128];
  float a[2][16][128]; /* a wavefront's L of (pair, key), -inf where not causal */
};

/* D = A B + C for one group; a and b: the even and odd elements of the
 * lane's word (4 bytes each). */
M3IDX_DEV mfma_i32x4 mfma_group(const uint32_t (&a)[2], const uint32_t (&b)[2], mfma_i32x4 c) {
#if defined(__gfx90a__)
  c = __builtin_amdgcn_mfma_i32_16x16x16i8((int)a[0], (int)b[0], c, 0, 0, 0);
  return __builtin_amdgcn_mfma_i32_16x16x16i8((int)a[1], (int)b[1], c, 0, 0, 0);
#elif defined(MFMA_TARGET)
  const long wa = (long)((uint64_t)a[1] << 32 | a[0]), wb = (long)((uint64_t)b[1] << 32 | b[0]);
  return __builtin_amdgcn_mfma_i32_16x16x32_i8(wa, wb, c, 0, 0, 0);
#else
  (void)a, (void)b;
  return c;
#endif
}

/* The values in halves of the codes of word w as signed bytes: the even
 * codes (0, 2, 4, 6) into b[0], the odd ones into b[1], by v_perm_b32 from
 * the tables of each sign. */
template <int P> M3IDX_DEV void code_halves(uint32_t w, uint32_t (&b)[2]) {
#if defined(MFMA_TARGET)
  w = path_word<P>(w);
  const uint32_t n[2] = {w & 0x0f0f0f0fu, (w >> 4) & 0x0f0f0f0fu};
#pragma unroll
  for (int i = 0; i < 2; i++) {
    const uint32_t sel = n[i] & 0x07070707u;
    const uint32_t pos = __builtin_amdgcn_perm(0x0c080604u, 0x03020100u, sel);
    const uint32_t neg = __builtin_amdgcn_perm(0xf4f8fafcu, 0xfdfeff00u, sel);
    const uint32_t m = ((n[i] >> 3) & 0x01010101u) * 0xffu;
    b[i] = (pos & ~m) | (neg & m);
  }
#else
  b[0] = b[1] = w;
#endif
}

/* Lane L's digits: pair L % 16's Q (lib/filter-cut.h, 12 bits) for
 * elements 32 g + 8 (L / 16) + {0, 2, 4, 6} and {1, 3, 5, 7}, low and high
 * digit planes. */
M3IDX_DEV void mfma_digits(const warp_query *wq16, uint32_t (&lo)[4][2], uint32_t (&hi)[4][2]) {
  const int lane = (int)(threadIdx.x & 63), col = lane & 15, slot = lane >> 4;
  const float *qf = wq16[col].qf;
  uint32_t top = 0u;
#pragma unroll
  for (int k = 0; k < 32; k++) {
    const uint32_t u = f_bits(qf[32 * (k >> 3) + 8 * slot + (k & 7)]) & 0x7fffffffu;
    top = u < 0x7f800000u ? max(top, u) : top;
  }
  top = max(top, (uint32_t)__shfl_xor((int)top, 16));
  top = max(top, (uint32_t)__shfl_xor((int)top, 32));
  const int32_t hq = m3idx__cut_exponent(top);
#pragma unroll
  for (int g = 0; g < 4; g++)
#pragma unroll
    for (int i = 0; i < 2; i++) {
      uint32_t l = 0u, u = 0u;
#pragma unroll
      for (int j = 0; j < 4; j++) {
        const float q = qf[32 * g + 8 * slot + 2 * j + i];
        const int32_t v = m3idx__cut_q_finite(q, hq, M3IDX_GEMM_CUT_BITS);
        l |= m3idx__cut_lo(v) << (8 * j);
        u |= m3idx__cut_hi(v) << (8 * j);
      }
      lo[g][i] = l;
      hi[g][i] = u;
    }
}

/* The wavefront's 16 pairs against the page of block b (factor, start,
 * width: key_factors of its keys): L of every (pair, key) on the matrix
 * cores into the wavefront's share of shared memory, then each pair's
 * keys whose interval reaches its floor summed exactly; the block scores
 * stored.  Pair 4 (L / 16) + i is (head[i], row[i]) and sees the first
 * nkeys[i] keys (0: none, no store). */
template <int P>
M3IDX_DEV void mfma_page(const gpu_call &c, mfma_smem &sm, const uint8_t *page, int b,
                         const float4 *factor, const float *start, const float *width,
                         const uint32_t (&lo)[4][2], const uint32_t (&hi)[4][2],
                         const int (&nkeys)[4], const int (&row)[4], const int (&head)[4]) {
  const int lane = (int)(threadIdx.x & 63), col = lane & 15, slot = lane >> 4;
  float(&av)[16][128] = sm.a[threadIdx.x >> 6];
  float top[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
#pragma unroll 2
  for (int ch = 0; ch < 8; ch++) {
    const int t = 16 * ch + col;
    const uint8_t *key = page + 64 * t + 4 * slot;
    const float4 f4 = factor[t];
    const float f[4] = {f4.x, f4.y, f4.z, f4.w};
    float acc[4];
#pragma unroll
    for (int i = 0; i < 4; i++)
      acc[i] = start[t];
#pragma unroll
    for (int g = 0; g < 4; g++) {
      uint32_t bw[2];
      code_halves<P>(*(const uint32_t *)(key + 16 * g), bw);
      const mfma_i32x4 h = mfma_group(hi[g], bw, mfma_i32x4{0, 0, 0, 0});
      const mfma_i32x4 s = h * 256 + M3IDX_GEMM_MAGIC_BITS;
      const mfma_i32x4 d = mfma_group(lo[g], bw, s);
#pragma unroll
      for (int i = 0; i < 4; i++)
        acc[i] = fmaf(__int_as_float(d[i]), f[g], acc[i]);
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const float v = t < nkeys[i] ? acc[i] : -INFINITY;
      av[4 * slot + i][t] = v;
      top[i] = fmaxf(top[i], v);
    }
  }
  /* Pair by pair (each in front of the lane's arrays in turn, so that one
     call of the exact sums serves all four): its floor from its largest L
     over the 16 lanes of its slot, the keys whose interval reaches it, those of them that
     fp64 sums exactly, then those of each quad of lanes one at a time,
     each summed by the quad (quad_key_dot), all quads at once; the lane
     that had it keeps it. */
  const int hl = lane & 31;
  int nk[4] = {nkeys[0], nkeys[1], nkeys[2], nkeys[3]};
  int rw[4] = {row[0], row[1], row[2], row[3]}, hd[4] = {head[0], head[1], head[2], head[3]};
#pragma unroll 1
  for (int i = 0; i < 4; i++) {
    float t0 = top[0];
    for (int m = 1; m < 16; m <<= 1)
      t0 = fmaxf(t0, M3IDX_SHFL_XOR(t0, m));
    const warp_query &wq = sm.wq[4 * slot + i];
    const float floor_at = interval_floor(wq, t0);
    uint32_t pass = 0u;
#pragma unroll
    for (int ch = 0; ch < 8; ch++) {
      const float v = av[4 * slot + i][16 * ch + col];
      pass |= (uint32_t)(v + width[16 * ch + col] >= floor_at) << ch;
    }
    m3idx__block_best best;
    m3idx__best_start(&best);
    uint32_t pending = fp64_pending(
        pass, [&](int ch) { return defer_to_fp64(best, wq, page, 16 * ch + col, c.scale); });
    for (;;) {
      const uint32_t have = M3IDX_BALLOT32(pending != 0u);
      if (have == 0u)
        break;
      const uint32_t quad = (have >> (hl & ~3)) & 15u;
      const int src = (hl & ~3) + (quad != 0u ? __ffs((int)quad) - 1 : 0);
      const int ch = M3IDX_SHFL32(pending != 0u ? __ffs((int)pending) - 1 : 0, src);
      if (hl == src && quad != 0u)
        pending &= pending - 1u;
      const int t = 16 * ch + (src & 15);
      const double d = quad_key_dot(sm.e2m1, wq, page + 64 * t, key_scales(page, t));
      if (hl == src && quad != 0u)
        m3idx__best_take_d(&best, d, c.scale);
    }
    merge_best_lanes(best, 1, 16, c.scale);
    if (col == 0 && nk[0] > 0)
      store_score(c, hd[0], rw[0], b, m3idx__best_logit(&best, c.scale));
#pragma unroll
    for (int k = 0; k < 3; k++)
      top[k] = top[k + 1], nk[k] = nk[k + 1], rw[k] = rw[k + 1], hd[k] = hd[k + 1];
  }
}

/* The 16 pairs' queries into shared memory (pair i: buffer pair
 * pair_of(i), or none: zeros), then their digits into registers. */
template <int P, class PairOf>
M3IDX_DEV void mfma_load(const gpu_call &c, mfma_smem &sm, int np, PairOf pair_of,
                         uint32_t (&lo)[4][2], uint32_t (&hi)[4][2]) {
  const int warp = threadIdx.x >> 5;
  __syncthreads(); /* the buffer's last readers are done */
  for (int i = warp; i < 16; i += GEMM_WARPS)
    load_query_or_zero<P>(c, sm.wq[i], i < np ? pair_of(i) : -1);
  __syncthreads();
  mfma_digits(sm.wq, lo, hi);
}

/* A wavefront's page: its factors into the wavefront's share of shared
 * memory, then mfma_page. */
template <int P>
M3IDX_DEV void mfma_wave_page(const gpu_call &c, mfma_smem &sm, const uint8_t *page, int b,
                              const uint32_t (&lo)[4][2], const uint32_t (&hi)[4][2],
                              const int (&nkeys)[4], const int (&row)[4], const int (&head)[4]) {
  const int wave = threadIdx.x >> 6, lane = (int)(threadIdx.x & 63);
  const float sign = c.scale < 0.0f ? -1.0f : 1.0f;
  const int emax = page_emax<P>(page); /* each half the same */
  __builtin_amdgcn_wave_barrier(); /* the last page's readers of the factors are done */
#pragma unroll
  for (int i = 0; i < 2; i++)
    key_factors(key_scales(page, lane + 64 * i), emax, sign, sm.factor[wave][lane + 64 * i],
                sm.start[wave][lane + 64 * i], sm.width[wave][lane + 64 * i]);
  __builtin_amdgcn_wave_barrier();
  mfma_page<P>(c, sm, page, b, sm.factor[wave], sm.start[wave], sm.width[wave], lo, hi, nkeys,
               row, head);
}

/* Decode: blocks take work-map entries; the request's pairs 16 at a time,
 * each wavefront a page of the entry in turn. */
template <int P>
__global__ void __launch_bounds__(GEMM_THREADS)
    score_decode_mfma(gpu_call c, const int32_t *map, int capacity) {
  __shared__ mfma_smem sm;
  fill_e2m1(sm.e2m1);
  const int wave = threadIdx.x >> 6, slot = (int)(threadIdx.x & 63) >> 4;
  const int H = c.num_heads, qlen = c.query_len, pairs = qlen * H;
  for (int e = blockIdx.x; e < capacity; e += gridDim.x) {
    int r, s, b0, count;
    if (map_entry(c, map, e, &r, &s, &b0, &count) <= 0)
      continue;
    for (int p0 = 0; p0 < pairs; p0 += 16) {
      const int np = min(16, pairs - p0);
      uint32_t lo[4][2], hi[4][2];
      mfma_load<P>(c, sm, np, [&](int i) {
        return (long long)(r * qlen + (p0 + i) / H) * H + (p0 + i) % H;
      }, lo, hi);
      int pos[4], row[4], head[4];
#pragma unroll
      for (int k = 0; k < 4; k++) {
        const int i = 4 * slot + k, p = p0 + i, j = p / H;
        row[k] = r * qlen + j, head[k] = p % H;
        pos[k] = i < np ? s - qlen + j : -1;
      }
      for (int k = wave; k < count; k += 2) {
        const int b = b0 + k;
        const uint8_t *page = page_of(c, r, b);
        if (page == nullptr)
          continue;
        int nkeys[4];
#pragma unroll
        for (int i = 0; i < 4; i++)
          nkeys[i] = m3idx__keys_seen(pos[i], b);
        mfma_wave_page<P>(c, sm, page, b, lo, hi, nkeys, row, head);
      }
    }
  }
}

/* Prefill: block (x, y) scores key blocks MFMA_BLOCKS x .. + MFMA_BLOCKS -
 * 1 against the pairs of tiles y, y + gridDim.y, ... (16 a tile), for each
 * request among them, each wavefront a block in turn. */
template <int P>
__global__ void __launch_bounds__(GEMM_THREADS) score_prefill_mfma(gpu_call c, int ntiles) {
  __shared__ mfma_smem sm;
  __shared__ int at_pos[16], at_req[16];
  fill_e2m1(sm.e2m1);
  const int wave = threadIdx.x >> 6, lane = threadIdx.x & 31, slot = (int)(threadIdx.x & 63) >> 4;
  const int H = c.num_heads;
  const int b0 = blockIdx.x * MFMA_BLOCKS, b1 = min(b0 + MFMA_BLOCKS, c.width);
  const long long npairs = (long long)c.num_rows * H;
  for (int tile = blockIdx.y; tile < ntiles; tile += gridDim.y) {
    const long long first = (long long)tile * 16;
    const int np = (int)min((long long)16, npairs - first);
    __syncthreads(); /* the last tile's readers are done */
    if (threadIdx.x < 16) {
      int r = -1, pos = -1;
      if ((int)threadIdx.x < np)
        pos = row_position(c, (int)((first + threadIdx.x) / H), &r);
      at_pos[threadIdx.x] = pos, at_req[threadIdx.x] = pos >= 0 ? r : -1;
    }
    __syncthreads();
    const int mine_pos = lane < 16 ? at_pos[lane] : -1;
    if (warp_max<P>(mine_pos) < b0 * 128)
      continue; /* no pair of the tile sees block b0 */
    uint32_t lo[4][2], hi[4][2];
    mfma_load<P>(c, sm, np, [&](int i) { return at_pos[i] >= b0 * 128 ? first + i : -1LL; },
                 lo, hi);
    int row[4], head[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
      const long long p = first + 4 * slot + k;
      row[k] = (int)(p / H), head[k] = (int)(p % H);
    }
    const int mine_req = lane < 16 ? at_req[lane] : -1;
    const int r_first = warp_min<P>(mine_req < 0 ? 0x7fffffff : mine_req);
    const int r_last = warp_max<P>(mine_req);
    for (int r = r_first; r <= r_last; r++) {
      const int last = warp_max<P>(mine_req == r ? mine_pos : -1);
      for (int b = b0 + wave; b < min(b1, last / 128 + 1); b += 2) {
        const uint8_t *page = page_of(c, r, b);
        if (page == nullptr)
          continue;
        int nkeys[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
          const int k = 4 * slot + i;
          nkeys[i] = at_req[k] == r ? m3idx__keys_seen(at_pos[k], b) : 0;
        }
        mfma_wave_page<P>(c, sm, page, b, lo, hi, nkeys, row, head);
      }
    }
  }
}

/* The launchers of the pick table's mfma row (kernel-pick.hip). */
#define MFMA_PATHS M3IDX_GPU_PATH_FAST, M3IDX_GPU_PATH_FAST_BROKEN

hipError_t m3idx_gpu_setup_mfma(int path, int *grid) {
  *grid = 0;
  hipError_t e = hipSuccess;
  on_path<MFMA_PATHS>(path, [&](auto p) {
    e = m3idx_gpu_decode_grid((const void *)score_decode_mfma<decltype(p)::value>, GEMM_THREADS,
                              0, grid);
  });
  return e;
}

hipError_t m3idx_gpu_decode_mfma(const gpu_call &c, const int32_t *map, int capacity,
                                 hipStream_t s) {
  return launch_decode<MFMA_PATHS>(c, map, capacity, GEMM_THREADS, 0, s, [](auto p) {
    return score_decode_mfma<decltype(p)::value>;
  });
}

hipError_t m3idx_gpu_prefill_mfma(const gpu_call &c, hipStream_t s) {
  return launch_prefill<MFMA_PATHS>(c, 16, MFMA_BLOCKS, GEMM_THREADS, 0, s,
                                    [](auto p) { return score_prefill_mfma<decltype(p)::value>; });
}

#endif /* !M3IDX_HIP_PLATFORM_NVIDIA */
