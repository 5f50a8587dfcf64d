/*
 * mma-quads.h - the integer filter on NVIDIA's tensor cores, a page at a
 * time for up to two quads of pairs (score-mma.hip), kept apart so that a
 * kernel whose pages are in shared memory can score them the same way.
 *
 * mma.sync m16n8k32 (u8 x s8 -> s32) multiplies the code bytes of 16 keys
 * (rows; the value in halves + 12, as code_bytes gives them) by the two
 * digit planes of four pairs (8 columns: lo and hi of each), one group of
 * 32 elements at a time.  The queries are cut as the tensor-core filter
 * cuts them (lib/filter-cut.h, M3IDX_GEMM_CUT_BITS), and 256 hi + lo
 * plus the bits of 1.5 * 2^23 less the codes' bias reads as the float
 * 1.5 * 2^23 + S_g: A of a key is its start plus one fused multiply-add
 * a group (key_factors, gemm-parts.h), and the keys whose interval
 * reaches the pair's largest A are summed in fp64 (or exactly), a quad
 * of lanes a key as the gemm row sums them.  The page may be in global
 * or shared memory.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_GPU_MMA_QUADS_H
#define M3IDX_GPU_MMA_QUADS_H

#include "gemm-parts.h"

#if defined(M3IDX_HIP_PLATFORM_NVIDIA)

#define MMA_PAIRS 16       /* pairs whose queries a block holds at a time */

/* Where a pair of the buffer scores: its row, head, position and request
 * (pos -1: not a pair of the call, or bad lengths). */
struct pair_at {
  int row, head, pos, req;
};

/* key_factors of a page's keys, laid out as the MMA's lanes read them:
 * f[t][g][gid] holds F_g of keys 16 t + gid and 16 t + gid + 8, which the
 * four lanes of gid read at once; start and width the same keys'. */
struct page_factors {
  float2 f[8][4][8];
  float2 start[8][8];
  float2 width[8][8];
};

struct mma_smem {
  double e2m1[16];
  warp_query wq[MMA_PAIRS];
  pair_at at[MMA_PAIRS];
  page_factors pf[FP64_WARPS]; /* one a warp */
};

/* The warp's table of the page's factors: each lane reads the scale
 * words of keys lane + 32 i, which give the page's emax, and forms those
 * keys' factors once for every pair. */
M3IDX_DEV void fill_page_factors(page_factors &pf, const uint8_t *page, float sign) {
  const int lane = threadIdx.x & 31, gid = lane & 7, h = (lane >> 3) & 1;
  uint32_t sc[4];
  lane_page_scales(page, sc);
  const int emax = page_emax_of<M3IDX_GPU_PATH_PLAIN>(sc);
  M3IDX_SYNCWARP(); /* the table's last readers are done */
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const int t = (lane >> 4) + 2 * i;
    float4 f;
    float start, width;
    key_factors(sc[i], emax, sign, f, start, width);
    const float fg[4] = {f.x, f.y, f.z, f.w};
#pragma unroll
    for (int g = 0; g < 4; g++)
      ((float *)&pf.f[t][g][gid])[h] = fg[g];
    ((float *)&pf.start[t][gid])[h] = start;
    ((float *)&pf.width[t][gid])[h] = width;
  }
  M3IDX_SYNCWARP();
}

/* Pair i of the buffer sees block b of request r. */
M3IDX_DEV bool sees(const mma_smem &sm, int i, int r, int b) {
  return sm.at[i].pos >= b * 128 && sm.at[i].req == r;
}

/* D = A B for one group: a0/a2 are key gid's code bytes of elements
 * 4 tig .. + 3 and 16 + 4 tig .. + 3 of the MMA's k, a1/a3 key gid + 8's;
 * b0/b1 column gid's digits of the same k (C is 0: a seed there cost
 * more register moves than the add it saves).  d0/d1: key gid, columns
 * 2 tig and 2 tig + 1; d2/d3: key gid + 8. */
M3IDX_DEV void mma_group(uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                         uint32_t b1, int d[4]) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%10, %10, %10, %10};"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(0));
}

/* Where lane (gid, tig)'s pair of a quad scores: its buffer index (-1:
 * none, or its row does not see block b of request r), row, head and
 * causal keys in the block. */
struct lane_pair {
  int mine, row, head, nkeys;
};

template <bool PREFILL>
M3IDX_DEV lane_pair pair_of_lane(const gpu_call &c, const mma_smem &sm, int r, int s, int b,
                                 int p0, int q0, int np) {
  const int tig = threadIdx.x & 3;
  lane_pair lp;
  if (PREFILL) {
    lp.mine = q0 + tig < np && sees(sm, q0 + tig, r, b) ? q0 + tig : -1;
    const pair_at &at = sm.at[lp.mine >= 0 ? lp.mine : 0];
    lp.row = at.row, lp.head = at.head;
    lp.nkeys = lp.mine >= 0 ? m3idx__keys_seen(at.pos, b) : 0;
  } else {
    const int H = c.num_heads, qlen = c.query_len;
    lp.mine = q0 + tig < np ? q0 + tig : -1;
    const int p = p0 + (lp.mine >= 0 ? lp.mine : 0), j = p / H;
    lp.row = r * qlen + j, lp.head = p % H;
    lp.nkeys = lp.mine >= 0 ? m3idx__keys_seen(s - qlen + j, b) : 0;
  }
  return lp;
}

/* The keys of the lane's pair whose interval [A, A + width] reaches the
 * pair's largest A (a: -inf for a key it does not see or of NaN scale;
 * top: the lane's largest), summed exactly; the block score to (head,
 * row).  q0: the quad's first pair. */
M3IDX_DEV void finish_quad(const gpu_call &c, const mma_smem &sm, const page_factors &pf,
                           const uint8_t *page, int b, int q0, const lane_pair &lp,
                           const float (&a)[16], float top) {
  const int lane = threadIdx.x & 31, gid = lane >> 2;
  const warp_query &wq = sm.wq[lp.mine >= 0 ? lp.mine : 0];
  /* The pair's largest A: over the 8 lanes of the same tig. */
  for (int m = 4; m < 32; m <<= 1)
    top = fmaxf(top, M3IDX_SHFL_XOR(top, m));
  const float floor = interval_floor(wq, top);
  uint32_t pass = 0u;
#pragma unroll
  for (int t = 0; t < 8; t++)
    pass |= reach_bits(a[2 * t], a[2 * t + 1], pf.width[t][gid], floor) << (2 * t);
  m3idx__block_best best[1];
  m3idx__best_start(&best[0]);
  uint32_t pending[1] = {fp64_pending(pass, [&](int i) {
    return defer_to_fp64(best[0], wq, page, 16 * (i >> 1) + gid + 8 * (i & 1), c.scale);
  })};
  /* The fp64 candidates of each quad of lanes (the same keys, its four
     pairs), each summed with its own pair's query. */
  sum_quad_candidates<1>(sm.e2m1, pending, best, c.scale, [&](int src, int, int i) {
    const int t = 16 * (i >> 1) + gid + 8 * (i & 1);
    return quad_key{&sm.wq[q0 + (src & 3)], page + 64 * t, key_scales(page, t)};
  });
  merge_best_lanes(best[0], 4, 32, c.scale); /* the eight lanes of the pair */
  if (gid == 0 && lp.mine >= 0 && lp.nkeys > 0)
    store_score(c, lp.head, lp.row, b, m3idx__best_logit(&best[0], c.scale));
}

/* Block b (page) of request r against NQ quads of pairs from q0 of the
 * block's buffer (those below np that see it: in decode, pairs p0 + i of
 * request r, whose seq_len is s; in prefill, as sm.at says); pf: the
 * page's factors.  Lane (gid, tig) = (lane / 4, lane % 4) decodes word
 * tig of each key group of keys 16 t + gid and 16 t + gid + 8 (t =
 * 0..7) once for the NQ quads, feeds each quad's MMA with column gid's
 * digits (pair q0 + 4 quad + gid / 2, plane gid % 2) of the same
 * elements, and forms A of the two keys for pair q0 + 4 quad + tig. */
template <int P, bool PREFILL, int NQ>
M3IDX_DEV void score_quads(const gpu_call &c, const mma_smem &sm, const page_factors &pf,
                           const uint8_t *page, int r, int s, int b, int p0, int q0, int np) {
  const int lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
  if (PREFILL) {
    bool any = false;
    for (int k = q0; k < min(q0 + 4 * NQ, np); k++)
      any = any || sees(sm, k, r, b);
    if (!any)
      return;
  }
  uint32_t bf[NQ][4][2];
  lane_pair lp[NQ];
  int seed[NQ][4];
  float a[NQ][16], top[NQ];
#pragma unroll
  for (int qd = 0; qd < NQ; qd++) {
    const int bq = q0 + 4 * qd + (gid >> 1);
    const warp_query &bw = sm.wq[min(bq, np - 1)];
#pragma unroll
    for (int g = 0; g < 4; g++) {
      const int32_t *plane = (gid & 1) ? bw.hi : bw.lo;
      bf[qd][g][0] = bq < np ? (uint32_t)plane[8 * g + 2 * tig] : 0u;
      bf[qd][g][1] = bq < np ? (uint32_t)plane[8 * g + 2 * tig + 1] : 0u;
    }
    lp[qd] = pair_of_lane<PREFILL>(c, sm, r, s, b, p0, q0 + 4 * qd, np);
    const warp_query &mw = sm.wq[lp[qd].mine >= 0 ? lp[qd].mine : 0];
#pragma unroll
    for (int g = 0; g < 4; g++)
      seed[qd][g] = M3IDX_GEMM_MAGIC_BITS - mw.bias[g];
    top[qd] = -INFINITY;
  }
  const code_tables tab = code_tables_now();
#pragma unroll
  for (int t = 0; t < 8; t++) {
    const uint8_t *k0 = page + 64 * (16 * t + gid), *k1 = k0 + 64 * 8;
    const float2 start = pf.start[t][gid];
    float a0[NQ], a1[NQ];
#pragma unroll
    for (int qd = 0; qd < NQ; qd++)
      a0[qd] = start.x, a1[qd] = start.y;
#pragma unroll
    for (int g = 0; g < 4; g++) {
      const uint32_t w0 = path_word<P>(*(const uint32_t *)(k0 + 16 * g + 4 * tig));
      const uint32_t w1 = path_word<P>(*(const uint32_t *)(k1 + 16 * g + 4 * tig));
      uint32_t x0, x1, x2, x3;
      code_bytes(w0, tab, x0, x2);
      code_bytes(w1, tab, x1, x3);
      const float2 f = pf.f[t][g][gid];
#pragma unroll
      for (int qd = 0; qd < NQ; qd++) {
        int d[4];
        mma_group(x0, x1, x2, x3, bf[qd][g][0], bf[qd][g][1], d);
        a0[qd] = fmaf(__int_as_float(d[1] * 256 + d[0] + seed[qd][g]), f.x, a0[qd]);
        a1[qd] = fmaf(__int_as_float(d[3] * 256 + d[2] + seed[qd][g]), f.y, a1[qd]);
      }
    }
#pragma unroll
    for (int qd = 0; qd < NQ; qd++) { /* causal keys only */
      a[qd][2 * t] = 16 * t + gid < lp[qd].nkeys ? a0[qd] : -INFINITY;
      a[qd][2 * t + 1] = 16 * t + gid + 8 < lp[qd].nkeys ? a1[qd] : -INFINITY;
      top[qd] = fmaxf(top[qd], fmaxf(a[qd][2 * t], a[qd][2 * t + 1]));
    }
  }
#pragma unroll
  for (int qd = 0; qd < NQ; qd++)
    finish_quad(c, sm, pf, page, b, q0 + 4 * qd, lp[qd], a[qd], top[qd]);
}

/* The quads of pairs q0 = 0, 4, ... of the buffer against a page, NQMAX
 * (1 or 2) at a time while more than one is left; the warp's table first
 * takes the page's factors. */
template <int P, bool PREFILL, int NQMAX>
M3IDX_DEV void score_page(const gpu_call &c, mma_smem &sm, const uint8_t *page, int r, int s,
                          int b, int p0, int np) {
  page_factors &pf = sm.pf[threadIdx.x >> 5];
  fill_page_factors(pf, page, c.scale < 0.0f ? -1.0f : 1.0f);
  for (int q0 = 0; q0 < np;) {
    if (NQMAX == 2 && np - q0 > 4) {
      score_quads<P, PREFILL, 2>(c, sm, pf, page, r, s, b, p0, q0, np);
      q0 += 8;
    } else {
      score_quads<P, PREFILL, 1>(c, sm, pf, page, r, s, b, p0, q0, np);
      q0 += 4;
    }
  }
}

#endif /* M3IDX_HIP_PLATFORM_NVIDIA */

#endif /* M3IDX_GPU_MMA_QUADS_H */
