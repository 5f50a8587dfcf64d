/*
 * score-gemm.hip - prefill on NVIDIA's tensor cores as a tiled GEMM.
 *
 * A block holds a tile of 64 (row, head) pairs, 16 a warp, and streams
 * key blocks.  Each page is decoded once into shared memory as code bytes
 * (the value in halves + 12) and read by every pair of the tile;
 * mma.sync m16n8k32 (s8 digits x u8 codes -> s32) takes 16 pairs by 8
 * keys by one group of 32 elements, the high digit plane first, whose sum
 * times 256 and the bits of 1.5 * 2^23 less the codes' bias seed the low
 * plane's.  So each (pair, key, group) costs one integer multiply-add and
 * one fused multiply-add: A is lib/filter-cut.h's tensor-core form,
 * started at the low end of the key's own interval.  The keys whose
 * interval reaches the pair's largest low end are summed exactly in fp64,
 * a quad of lanes a key and eight keys at once (quad_key_dot,
 * score-parts.h).
 *
 * SPDX-License-Identifier: MIT
 */
#include "gemm-parts.h"

#if defined(M3IDX_HIP_PLATFORM_NVIDIA)

#define GEMM_PAIRS (16 * GEMM_WARPS) /* the pairs of a tile */
/* The key blocks a block streams for a tile: 32 where the grid at 16
 * would be GEMM_DEEP_GRID blocks or more (many waves: each tile's setup,
 * its queries and digits, then paid half as often), else 16 (a shallow
 * grid needs the blocks to fill the SMs' last wave). */
#define GEMM_BLOCKS 16
#define GEMM_BLOCKS_DEEP 32
#define GEMM_DEEP_GRID 4096
#define GEMM_CTAS_PER_SM 3
/* A key's 128 code bytes in the tile, then 16 bytes of padding, so that
 * the eight keys of an MMA's columns load from distinct banks. */
#define TILE_STRIDE 144

/* Where a pair of the tile scores (pos -1: none, or bad lengths). */
struct gemm_pair {
  int row, head, pos, req;
};

struct gemm_smem {
  double e2m1[16];
  uint32_t scales[128];        /* each key's scale word (its exact sum's) */
  warp_query wq[GEMM_PAIRS];
  gemm_pair at[GEMM_PAIRS];
  float4 factor[128];          /* F_g of each key, times sign(scale); 0 for a NaN scale */
  float start[128];            /* -C - e_k of each key, -inf for a NaN scale */
  float width[128];            /* 2 e_k of each key */
  alignas(16) uint8_t tile[128 * TILE_STRIDE];
};

/* D = A B + C for one group: a holds rows gid and gid + 8 of the pairs'
 * digits (k 4 tig .. + 3 and 16 + 4 tig .. + 3), b0/b1 column gid's code
 * bytes of the same k; d0/d1: row gid, columns 2 tig
 * and 2 tig + 1; d2/d3: row gid + 8. */
M3IDX_DEV void mma_s8u8(const uint32_t (&a)[4], uint32_t b0, uint32_t b1, const int (&c)[4],
                        int (&d)[4]) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%10, %11, %12, %13};"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(c[0]), "r"(c[1]),
        "r"(c[2]), "r"(c[3]));
}

/* The digits of the warp's 16 pairs (wq16) as MMA operands: lo[g] and
 * hi[g] for group g, in the A layout of mma_s8u8, whose k runs over the
 * group's elements in the order code_bytes gives them (k 4 tig .. + 3:
 * elements 8 tig .. + 3; k 16 + 4 tig .. + 3: elements 8 tig + 4 .. +
 * 7), so that a lane's B operand is one code word; seed[g][r] = the bits
 * of 1.5 * 2^23 less 12 times the group's sum of Q, for row gid + 8 r. */
M3IDX_DEV void pair_digits(const warp_query *wq16, uint32_t (&lo)[4][4], uint32_t (&hi)[4][4],
                           int (&seed)[4][2]) {
  const int lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const float *qf = wq16[gid + 8 * r].qf;
    uint32_t top = 0u;
#pragma unroll
    for (int k = 0; k < 32; k++) {
      const uint32_t u = f_bits(qf[32 * (k >> 3) + 8 * tig + (k & 7)]) & 0x7fffffffu;
      top = u < 0x7f800000u ? max(top, u) : top;
    }
    top = max(top, (uint32_t)M3IDX_SHFL_XOR((int)top, 1));
    top = max(top, (uint32_t)M3IDX_SHFL_XOR((int)top, 2));
    const int32_t hq = m3idx__cut_exponent(top);
#pragma unroll
    for (int g = 0; g < 4; g++) {
      int sum = 0;
#pragma unroll
      for (int h = 0; h < 2; h++) {
        uint32_t l = 0u, u = 0u;
#pragma unroll
        for (int j = 0; j < 4; j++) {
          const float q = qf[32 * g + 8 * tig + 4 * h + j];
          const int32_t v = m3idx__cut_q_finite(q, hq, M3IDX_GEMM_CUT_BITS);
          l |= m3idx__cut_lo(v) << (8 * j);
          u |= m3idx__cut_hi(v) << (8 * j);
          sum += v;
        }
        lo[g][r + 2 * h] = l;
        hi[g][r + 2 * h] = u;
      }
      sum += M3IDX_SHFL_XOR(sum, 1);
      sum += M3IDX_SHFL_XOR(sum, 2);
      seed[g][r] = M3IDX_GEMM_MAGIC_BITS - M3IDX_CUT_CODE_BIAS * sum;
    }
  }
}

/* Thread t decodes key t of the page into the tile: its code bytes, in
 * the order the MMA's columns read them (lane tig of a column reads 32
 * bytes, code word tig of each group), its factors, -C and its scale
 * word. */
template <int P>
M3IDX_DEV void decode_key(gemm_smem &sm, const uint8_t *page, int emax, float sign) {
  const int t = threadIdx.x;
  const uint4 *src = (const uint4 *)(page + 64 * t);
  const uint32_t sc = key_scales(page, t);
  const code_tables tab = code_tables_now();
  uint32_t kb[4][8]; /* group g, word j: kb[g][2 j] and kb[g][2 j + 1] */
#pragma unroll
  for (int g = 0; g < 4; g++) {
    const uint4 raw = src[g];
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int j = 0; j < 4; j++)
      code_bytes(path_word<P>(w[j]), tab, kb[g][2 * j], kb[g][2 * j + 1]);
  }
  uint8_t *row = sm.tile + TILE_STRIDE * t;
#pragma unroll
  for (int s = 0; s < 4; s++) {
    *(uint4 *)(row + 32 * s) = uint4{kb[0][2 * s], kb[0][2 * s + 1], kb[1][2 * s], kb[1][2 * s + 1]};
    *(uint4 *)(row + 32 * s + 16) =
        uint4{kb[2][2 * s], kb[2][2 * s + 1], kb[3][2 * s], kb[3][2 * s + 1]};
  }
  key_factors(sc, emax, sign, sm.factor[t], sm.start[t], sm.width[t]);
  sm.scales[t] = sc;
}

/* The warp's 16 pairs (queries wq16) against the page of block b: L of
 * every (pair, key) on the tensor cores, then each pair's keys whose
 * interval reaches its floor summed exactly; the block scores stored.
 * load_b(ch, b) gives the code words of key 8 ch + gid (lane tig's word
 * of each group); factor, start and width hold key_factors of the page's
 * keys.  Row gid + 8 r of the tile is pair (head[r], row[r]) and sees the
 * first nkeys[r] keys (0: none, no store). */
template <class LoadB>
M3IDX_DEV void score_tile_page(const gpu_call &c, const double *e2m1, const warp_query *wq16,
                               const uint8_t *page, int b, const float4 *factor,
                               const float *start, const float *width, const uint32_t *scales,
                               const uint32_t (&lo)[4][4],
                               const uint32_t (&hi)[4][4], const int (&seed)[4][2],
                               const int (&nkeys)[2], const int (&row)[2], const int (&head)[2],
                               LoadB load_b) {
  const int lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
  float a[16][4];
  float top[2] = {-INFINITY, -INFINITY};
  const bool partial = M3IDX_BALLOT32(nkeys[0] < 128 || nkeys[1] < 128) != 0u;
#pragma unroll
  for (int ch = 0; ch < 16; ch++) {
    uint32_t bw[4][2];
    load_b(ch, bw);
    const int k0 = 8 * ch + 2 * tig;
    const float4 f0 = factor[k0], f1 = factor[k0 + 1];
    const float ff0[4] = {f0.x, f0.y, f0.z, f0.w}, ff1[4] = {f1.x, f1.y, f1.z, f1.w};
    const float2 m = *(const float2 *)&start[k0];
    float acc[4] = {m.x, m.y, m.x, m.y};
#pragma unroll
    for (int g = 0; g < 4; g++) {
      const int zero[4] = {0, 0, 0, 0};
      int h[4], d[4];
      mma_s8u8(hi[g], bw[g][0], bw[g][1], zero, h);
      const int s[4] = {h[0] * 256 + seed[g][0], h[1] * 256 + seed[g][0],
                        h[2] * 256 + seed[g][1], h[3] * 256 + seed[g][1]};
      mma_s8u8(lo[g], bw[g][0], bw[g][1], s, d);
      acc[0] = fmaf(__int_as_float(d[0]), ff0[g], acc[0]);
      acc[1] = fmaf(__int_as_float(d[1]), ff1[g], acc[1]);
      acc[2] = fmaf(__int_as_float(d[2]), ff0[g], acc[2]);
      acc[3] = fmaf(__int_as_float(d[3]), ff1[g], acc[3]);
    }
    if (partial) {
#pragma unroll
      for (int i = 0; i < 4; i++)
        acc[i] = k0 + (i & 1) < nkeys[i >> 1] ? acc[i] : -INFINITY;
    }
#pragma unroll
    for (int i = 0; i < 4; i++)
      a[ch][i] = acc[i];
    top[0] = fmaxf(top[0], fmaxf(acc[0], acc[1]));
    top[1] = fmaxf(top[1], fmaxf(acc[2], acc[3]));
  }
  /* Each pair's floor, its largest L over the four lanes of its row; the
     keys whose interval reaches it, and those of them that fp64 sums
     exactly. */
  float floor_at[2];
  uint32_t pass[2] = {0u, 0u};
#pragma unroll
  for (int r = 0; r < 2; r++) {
    top[r] = fmaxf(top[r], M3IDX_SHFL_XOR(top[r], 1));
    top[r] = fmaxf(top[r], M3IDX_SHFL_XOR(top[r], 2));
    floor_at[r] = interval_floor(wq16[gid + 8 * r], top[r]);
  }
#pragma unroll
  for (int ch = 0; ch < 16; ch++) {
    const float2 w = *(const float2 *)&width[8 * ch + 2 * tig];
#pragma unroll
    for (int r = 0; r < 2; r++)
      pass[r] |= reach_bits(a[ch][2 * r], a[ch][2 * r + 1], w, floor_at[r]) << (2 * ch);
  }
  m3idx__block_best best[2];
  uint32_t pending[2];
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const warp_query &wq = wq16[gid + 8 * r];
    m3idx__best_start(&best[r]);
    pending[r] = fp64_pending(pass[r], [&](int i) {
      const int t = 8 * (i >> 1) + 2 * tig + (i & 1);
      return defer_key_to_fp64(best[r], wq, page + 64 * t, (const uint8_t *)&scales[t], c.scale);
    });
  }
  /* The pending keys of each quad (the four lanes of row gid: pairs gid
     and gid + 8), summed exactly. */
  sum_quad_candidates<2>(e2m1, pending, best, c.scale, [&](int src, int r, int i) {
    const int t = 8 * (i >> 1) + 2 * (src & 3) + (i & 1);
    return quad_key{&wq16[gid + 8 * r], page + 64 * t, scales[t]};
  });
#pragma unroll
  for (int r = 0; r < 2; r++) {
    merge_best_lanes(best[r], 1, 4, c.scale);
    if (tig == 0 && nkeys[r] > 0)
      store_score(c, head[r], row[r], b, m3idx__best_logit(&best[r], c.scale));
  }
}

/* Block (x, y) scores key blocks span x .. span (x + 1) - 1 (span: the
 * width over gridDim.x) against the pairs of tiles y, y + gridDim.y,
 * ...: the tile's places and queries into shared memory and its digits
 * into registers, then for each request among the tile's pairs each
 * block's page decoded by the whole block and scored by every warp for
 * its 16 pairs. */
template <int P>
__global__ void __launch_bounds__(GEMM_THREADS, GEMM_CTAS_PER_SM)
    score_prefill_gemm(gpu_call c, int ntiles) {
  extern __shared__ __align__(16) unsigned char smem_bytes[];
  gemm_smem &sm = *(gemm_smem *)smem_bytes;
  fill_e2m1(sm.e2m1);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, H = c.num_heads;
  const int gid = lane >> 2, p16 = 16 * warp;
  const int span = (c.width + (int)gridDim.x - 1) / (int)gridDim.x;
  const int b0 = blockIdx.x * span, b1 = min(b0 + span, c.width);
  const long long npairs = (long long)c.num_rows * H;
  const float sign = c.scale < 0.0f ? -1.0f : 1.0f;
  for (int tile = blockIdx.y; tile < ntiles; tile += gridDim.y) {
    const long long first = (long long)tile * GEMM_PAIRS;
    const int np = (int)min((long long)GEMM_PAIRS, npairs - first);
    __syncthreads(); /* the last tile's readers are done */
    if (threadIdx.x < GEMM_PAIRS) {
      const int i = threadIdx.x;
      gemm_pair at{0, 0, -1, -1};
      if (i < np) {
        at.row = (int)((first + i) / H), at.head = (int)((first + i) % H);
        at.pos = row_position(c, at.row, &at.req); /* -1 on bad lengths, recorded */
      }
      sm.at[i] = at;
    }
    __syncthreads();
    /* Nothing to do when no pair of the tile sees block b0. */
    const int top_pos = nv_warp_max(max(sm.at[lane].pos, sm.at[lane + 32].pos));
    if (top_pos < b0 * 128)
      continue;
    for (int i = p16; i < p16 + 16; i++)
      load_query_or_zero<P>(c, sm.wq[i], sm.at[i].pos >= b0 * 128 ? first + i : -1);
    uint32_t lo[4][4], hi[4][4];
    int seed[4][2];
    pair_digits(&sm.wq[p16], lo, hi, seed);
    const int none = 0x7fffffff;
    const int r_first = nv_warp_min(min(sm.at[lane].req < 0 ? none : sm.at[lane].req,
                                        sm.at[lane + 32].req < 0 ? none : sm.at[lane + 32].req));
    const int r_last = nv_warp_max(max(sm.at[lane].req, sm.at[lane + 32].req));
    for (int r = r_first; r <= r_last; r++) {
      /* The request's last position in the tile: its blocks end there. */
      const int last = nv_warp_max(max(sm.at[lane].req == r ? sm.at[lane].pos : -1,
                                       sm.at[lane + 32].req == r ? sm.at[lane + 32].pos : -1));
      const int rows_at[2] = {p16 + gid, p16 + gid + 8};
      const int b_end = min(b1, last / 128 + 1);
      for (int b = b0; b < b_end; b++) {
        const uint8_t *page = page_of(c, r, b);
        if (page == nullptr)
          continue;
        const int emax = page_emax<P>(page);
        __syncthreads(); /* the last page's readers are done */
        decode_key<P>(sm, page, emax, sign);
        __syncthreads();
        int nkeys[2], row[2], head[2];
#pragma unroll
        for (int k = 0; k < 2; k++) {
          const gemm_pair &at = sm.at[rows_at[k]];
          nkeys[k] = at.req == r ? m3idx__keys_seen(at.pos, b) : 0;
          row[k] = at.row, head[k] = at.head;
        }
        const auto from_tile = [&](int ch, uint32_t(&bw)[4][2]) {
          const uint8_t *col = sm.tile + TILE_STRIDE * (8 * ch + gid) + 32 * (lane & 3);
          const uint4 u0 = *(const uint4 *)col, u1 = *(const uint4 *)(col + 16);
          bw[0][0] = u0.x, bw[0][1] = u0.y, bw[1][0] = u0.z, bw[1][1] = u0.w;
          bw[2][0] = u1.x, bw[2][1] = u1.y, bw[3][0] = u1.z, bw[3][1] = u1.w;
        };
        score_tile_page(c, sm.e2m1, &sm.wq[p16], page, b, sm.factor, sm.start, sm.width, sm.scales,
                        lo, hi, seed, nkeys, row, head, from_tile);
      }
    }
  }
}

/* Decode: blocks take work-map entries; for each, the request's pairs 16
 * at a time into shared memory and their digits into every warp's
 * registers, then each warp a page of the entry: its factors into the
 * warp's share of shared memory and its code words straight from the
 * page (lane (gid, tig) decodes word tig of each group of key 8 ch +
 * gid: each word of the page once). */
struct gemm_decode_smem {
  double e2m1[16];
  warp_query wq[16];
  float4 factor[GEMM_WARPS][128];
  float start[GEMM_WARPS][128];
  float width[GEMM_WARPS][128];
  uint32_t scales[GEMM_WARPS][128];
};

template <int P>
__global__ void __launch_bounds__(GEMM_THREADS, GEMM_CTAS_PER_SM)
    score_decode_gemm(gpu_call c, const int32_t *map, int capacity) {
  __shared__ gemm_decode_smem sm;
  fill_e2m1(sm.e2m1);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
  const int H = c.num_heads, qlen = c.query_len, pairs = qlen * H;
  const float sign = c.scale < 0.0f ? -1.0f : 1.0f;
  for (int e = blockIdx.x; e < capacity; e += gridDim.x) {
    int r, s, b0, count;
    if (map_entry(c, map, e, &r, &s, &b0, &count) <= 0)
      continue;
    for (int p0 = 0; p0 < pairs; p0 += 16) {
      const int np = min(16, pairs - p0);
      __syncthreads(); /* the buffer's last readers are done */
      for (int i = warp; i < 16; i += GEMM_WARPS)
        load_query_or_zero<P>(
            c, sm.wq[i], i < np ? (long long)(r * qlen + (p0 + i) / H) * H + (p0 + i) % H : -1);
      __syncthreads();
      uint32_t lo[4][4], hi[4][4];
      int seed[4][2];
      pair_digits(sm.wq, lo, hi, seed);
      int pos[2], row[2], head[2];
#pragma unroll
      for (int k = 0; k < 2; k++) {
        const int i = gid + 8 * k, p = p0 + i, j = p / H;
        row[k] = r * qlen + j, head[k] = p % H;
        pos[k] = i < np ? s - qlen + j : -1;
      }
      for (int k = warp; k < count; k += GEMM_WARPS) {
        const int b = b0 + k;
        const uint8_t *page = page_of(c, r, b);
        if (page == nullptr)
          continue;
        uint32_t sc[4];
        lane_page_scales(page, sc);
        const int emax = page_emax_of<P>(sc);
        M3IDX_SYNCWARP(); /* the last page's readers of the factors are done */
#pragma unroll
        for (int i = 0; i < 4; i++) {
          key_factors(sc[i], emax, sign, sm.factor[warp][lane + 32 * i],
                      sm.start[warp][lane + 32 * i], sm.width[warp][lane + 32 * i]);
          sm.scales[warp][lane + 32 * i] = sc[i];
        }
        M3IDX_SYNCWARP();
        int nkeys[2];
#pragma unroll
        for (int k2 = 0; k2 < 2; k2++)
          nkeys[k2] = m3idx__keys_seen(pos[k2], b);
        const code_tables tab = code_tables_now();
        const auto from_page = [&](int ch, uint32_t(&bw)[4][2]) {
          const uint8_t *key = page + 64 * (8 * ch + gid) + 4 * tig;
#pragma unroll
          for (int g = 0; g < 4; g++)
            code_bytes(path_word<P>(*(const uint32_t *)(key + 16 * g)), tab, bw[g][0], bw[g][1]);
        };
        score_tile_page(c, sm.e2m1, sm.wq, page, b, sm.factor[warp], sm.start[warp],
                        sm.width[warp], sm.scales[warp], lo, hi, seed, nkeys, row, head, from_page);
      }
    }
  }
}

/* The launchers of the pick table's gemm row (kernel-pick.hip). */
#define GEMM_PATHS M3IDX_GPU_PATH_FAST, M3IDX_GPU_PATH_FAST_BROKEN

/* The prefill kernel's shared memory past the 48 KiB default; grid: the
 * decode kernel's, 0 where either cannot run (the row is then not used). */
hipError_t m3idx_gpu_setup_gemm(int path, int *grid) {
  *grid = 0;
  on_path<GEMM_PATHS>(path, [&](auto p) {
    if (hipFuncSetAttribute(score_prefill_gemm<decltype(p)::value>,
                            hipFuncAttributeMaxDynamicSharedMemorySize,
                            (int)sizeof(gemm_smem)) != hipSuccess ||
        m3idx_gpu_decode_grid((const void *)score_decode_gemm<decltype(p)::value>,
                              GEMM_THREADS, 0, grid) != hipSuccess) {
      (void)hipGetLastError();
      *grid = 0;
    }
  });
  return hipSuccess;
}

hipError_t m3idx_gpu_decode_gemm(const gpu_call &c, const int32_t *map, int capacity,
                                 hipStream_t s) {
  return launch_decode<GEMM_PATHS>(c, map, capacity, GEMM_THREADS, 0, s, [](auto p) {
    return score_decode_gemm<decltype(p)::value>;
  });
}

hipError_t m3idx_gpu_prefill_gemm(const gpu_call &c, hipStream_t s) {
  const long long grid16 =
      prefill_tiles(c, GEMM_PAIRS) * ((c.width + GEMM_BLOCKS - 1) / GEMM_BLOCKS);
  const int blocks = grid16 >= GEMM_DEEP_GRID ? GEMM_BLOCKS_DEEP : GEMM_BLOCKS;
  return launch_prefill<GEMM_PATHS>(c, GEMM_PAIRS, blocks, GEMM_THREADS, sizeof(gemm_smem), s,
                                    [](auto p) { return score_prefill_gemm<decltype(p)::value>; });
}

#endif /* M3IDX_HIP_PLATFORM_NVIDIA */
