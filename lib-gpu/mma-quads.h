/*
 * mma-quads.h - the integer filter on NVIDIA's tensor cores, a page at a
 * time for up to two quads of pairs (score-mma.hip), kept apart so that a
 * kernel whose pages are in shared memory can score them the same way.
 *
 * mma.sync m16n8k32 (u8 x s8 -> s32) multiplies the code bytes of 16 keys
 * (rows; the value in halves + 12, as code_bytes gives them) by the two
 * digit planes of four pairs (8 columns: lo and hi of each), one group of
 * 32 elements at a time.  Every product and sum is an exact integer, and
 * A is then formed as lane_filter_int forms it (same group order, same
 * operations), so it is the same float and the same keys pass.  Those keys
 * are summed in fp64 (or exactly) by the warp, as score_pair does.  The
 * page may be in global or shared memory.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_GPU_MMA_QUADS_H
#define M3IDX_GPU_MMA_QUADS_H

#include "score-parts.h"

#if defined(M3IDX_HIP_PLATFORM_NVIDIA)

#define MMA_PAIRS 16       /* pairs whose queries a block holds at a time */

/* Where a pair of the buffer scores: its row, head, position and request
 * (pos -1: not a pair of the call, or bad lengths). */
struct pair_at {
  int row, head, pos, req;
};

struct mma_smem {
  double e2m1[16];
  warp_query wq[MMA_PAIRS];
  pair_at at[MMA_PAIRS];
};

/* Pair i of the buffer sees block b of request r. */
M3IDX_DEV bool sees(const mma_smem &sm, int i, int r, int b) {
  return sm.at[i].pos >= b * 128 && sm.at[i].req == r;
}

/* D = A B for one group: a0/a2 are key gid's code bytes of elements
 * 4 tig .. + 3 and 16 + 4 tig .. + 3 of the MMA's k, a1/a3 key gid + 8's;
 * b0/b1 column gid's digits of the same k.  d0/d1: key gid, columns
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

/* The keys of the lane's pair whose A (a; valid: causal, no NaN scale;
 * top: the pair's largest A) is within twice the bound of top, summed
 * exactly; the block score to (head, row).  q0: the quad's first pair. */
M3IDX_DEV void finish_quad(const gpu_call &c, const mma_smem &sm, const uint8_t *page, int b,
                           int q0, const lane_pair &lp, const float (&a)[16], uint32_t valid,
                           float top) {
  const int lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
  const warp_query &wq = sm.wq[lp.mine >= 0 ? lp.mine : 0];
  /* The pair's largest A: over the 8 lanes of the same tig. */
  for (int m = 4; m < 32; m <<= 1)
    top = fmaxf(top, M3IDX_SHFL_XOR(top, m));
  const filter_floor f = floor_of(wq, top);
  m3idx__block_best best;
  m3idx__best_start(&best);
  uint32_t pending = fp64_candidates(best, wq, page, valid, a, f, c.scale,
                                     [gid](int i) { return 16 * (i >> 1) + gid + 8 * (i & 1); });
  /* The fp64 candidates one at a time, each summed by the whole warp with
     its pair's query; the lanes of that pair's tig keep it. */
  for (;;) {
    const unsigned any = __ballot_sync(0xffffffffu, pending != 0u);
    if (any == 0u)
      break;
    const int src = __ffs(any) - 1;
    const int i = M3IDX_SHFL32(pending != 0u ? __ffs(pending) - 1 : 0, src);
    if (lane == src)
      pending &= pending - 1u;
    const int t = 16 * (i >> 1) + (src >> 2) + 8 * (i & 1);
    const double d = warp_key_dot(sm.e2m1, sm.wq[q0 + (src & 3)], page + 64 * t,
                                  key_scales(page, t));
    if (tig == (src & 3))
      m3idx__best_take_d(&best, d, c.scale);
  }
  merge_best_across(best, 4, c.scale); /* the lanes of a tig took the same fp64 sums */
  if (gid == 0 && lp.mine >= 0 && lp.nkeys > 0)
    store_score(c, lp.head, lp.row, b, m3idx__best_logit(&best, c.scale));
}

/* Block b (page) of request r against NQ quads of pairs from q0 of the
 * block's buffer (those below np that see it: in decode, pairs p0 + i of
 * request r, whose seq_len is s; in prefill, as sm.at says).  Lane (gid,
 * tig) = (lane / 4, lane % 4) decodes word tig of each key group of keys
 * 16 t + gid and 16 t + gid + 8 (t = 0..7) once for the NQ quads, feeds
 * each quad's MMA with column gid's digits (pair q0 + 4 quad + gid / 2,
 * plane gid % 2) of the same elements, and forms A of the two keys for
 * pair q0 + 4 quad + tig. */
template <int P, bool PREFILL, int NQ>
M3IDX_DEV void score_quads(const gpu_call &c, const mma_smem &sm, const uint8_t *page, int r,
                           int s, int b, int p0, int q0, int np, int emax) {
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
  bool filter[NQ];
  float a[NQ][16], top[NQ];
  uint32_t valid[NQ];
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
    filter[qd] = sm.wq[lp[qd].mine >= 0 ? lp[qd].mine : 0].bound < INFINITY;
    top[qd] = -INFINITY;
    valid[qd] = 0;
  }
  const float sign = c.scale < 0.0f ? -1.0f : 1.0f;
  const code_tables tab = code_tables_now();
#pragma unroll
  for (int t = 0; t < 8; t++) {
    const uint8_t *k0 = page + 64 * (16 * t + gid), *k1 = k0 + 64 * 8;
    const uint32_t s0 = key_scales(page, 16 * t + gid), s1 = key_scales(page, 16 * t + gid + 8);
    float a0[NQ], a1[NQ];
#pragma unroll
    for (int qd = 0; qd < NQ; qd++)
      a0[qd] = a1[qd] = 0.0f;
#pragma unroll
    for (int g = 0; g < 4; g++) {
      const uint32_t w0 = path_word<P>(*(const uint32_t *)(k0 + 16 * g + 4 * tig));
      const uint32_t w1 = path_word<P>(*(const uint32_t *)(k1 + 16 * g + 4 * tig));
      uint32_t x0, x1, x2, x3;
      code_bytes(w0, tab, x0, x2);
      code_bytes(w1, tab, x1, x3);
      const float f0 = int_group_scale(s0, g, emax), f1 = int_group_scale(s1, g, emax);
#pragma unroll
      for (int qd = 0; qd < NQ; qd++) {
        int d[4];
        mma_group(x0, x1, x2, x3, bf[qd][g][0], bf[qd][g][1], d);
        const int bias = sm.wq[lp[qd].mine >= 0 ? lp[qd].mine : 0].bias[g];
        a0[qd] = fmaf((float)(d[1] * 256 + d[0] - bias), f0, a0[qd]);
        a1[qd] = fmaf((float)(d[3] * 256 + d[2] - bias), f1, a1[qd]);
      }
    }
    /* causal, and no NaN scale (whose logit is NaN, ignored) */
    const bool n0 = m3idx__key_spread((const uint8_t *)&s0) != 255;
    const bool n1 = m3idx__key_spread((const uint8_t *)&s1) != 255;
#pragma unroll
    for (int qd = 0; qd < NQ; qd++) {
      const bool v0 = n0 && 16 * t + gid < lp[qd].nkeys;
      const bool v1 = n1 && 16 * t + gid + 8 < lp[qd].nkeys;
      valid[qd] |= (v0 ? 1u : 0u) << (2 * t) | (v1 ? 1u : 0u) << (2 * t + 1);
      a[qd][2 * t] = filter[qd] && v0 ? sign * a0[qd] : -INFINITY;
      a[qd][2 * t + 1] = filter[qd] && v1 ? sign * a1[qd] : -INFINITY;
      top[qd] = fmaxf(top[qd], fmaxf(a[qd][2 * t], a[qd][2 * t + 1]));
    }
  }
#pragma unroll
  for (int qd = 0; qd < NQ; qd++)
    finish_quad(c, sm, page, b, q0 + 4 * qd, lp[qd], a[qd], valid[qd], top[qd]);
}

/* The quads of pairs q0 = 0, 4, ... of the buffer against a page, NQMAX
 * (1 or 2) at a time while more than one is left. */
template <int P, bool PREFILL, int NQMAX>
M3IDX_DEV void score_page(const gpu_call &c, const mma_smem &sm, const uint8_t *page, int r,
                          int s, int b, int p0, int np, int emax) {
  for (int q0 = 0; q0 < np;) {
    if (NQMAX == 2 && np - q0 > 4) {
      score_quads<P, PREFILL, 2>(c, sm, page, r, s, b, p0, q0, np, emax);
      q0 += 8;
    } else {
      score_quads<P, PREFILL, 1>(c, sm, page, r, s, b, p0, q0, np, emax);
      q0 += 4;
    }
  }
}

#endif /* M3IDX_HIP_PLATFORM_NVIDIA */

#endif /* M3IDX_GPU_MMA_QUADS_H */
