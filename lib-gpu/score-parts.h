/*
 * score-parts.h - what the scoring kernels share (score-fp64.hip, and
 * score-mma.hip and score-staged.hip on NVIDIA), portable: warp folds,
 * the warp's query with its filter bound, the page maximum, the fp32
 * filter of one key, the warp's exact fp64 sum of a candidate key, and one
 * pair's best key of a page.  Each vendor's own instructions are in its
 * room (vendor-nvidia.h, vendor-gfx950.h), called where its path macro
 * holds.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_GPU_SCORE_PARTS_H
#define M3IDX_GPU_SCORE_PARTS_H

#include "device-math.h"
#include "filter-cut.h"
#include "spec-rules.h"

#define FP64_THREADS 128
#define FP64_WARPS (FP64_THREADS / 32)

#include "vendor-gfx950.h"
#include "vendor-nvidia.h"

/* AMD's second launch bound would mean waves per SIMD: the kernels keep
 * their registers there (2 waves a SIMD); NVIDIA's is its room's. */
#ifndef FP64_BOUNDS
#define FP64_BOUNDS __launch_bounds__(FP64_THREADS)
#endif

/* f folded over the warp's 32 lanes (f a max or min: any order gives the
 * same value).  gfx950's fast path takes the last step, between the rows
 * of 16 lanes, with v_permlane16_swap of v with itself, which leaves each
 * lane its own value and its partner's. */
template <int P, class T, class F> M3IDX_DEV T warp_fold(T v, F f) {
  constexpr int rows = GFX950_OPS(P) ? 16 : 32;
  for (int m = 1; m < rows; m <<= 1)
    v = f(v, M3IDX_SHFL_XOR(v, m));
#if defined(__gfx950__)
  if constexpr (rows == 16)
    v = gfx950_fold_rows(v, f);
#endif
  return v;
}
#define MAX_OF(T) [](T a, T b) { return max(a, b); }
#define MIN_OF(T) [](T a, T b) { return min(a, b); }

/* The largest and smallest over the warp (an integer), and the largest
 * float: NVIDIA's room has them by redux.sync. */
#if defined(M3IDX_HIP_PLATFORM_NVIDIA)
template <int P, class T> M3IDX_DEV T warp_max(T v) { return nv_warp_max(v); }
template <int P, class T> M3IDX_DEV T warp_min(T v) { return nv_warp_min(v); }
template <int P> M3IDX_DEV float warp_max_float(float v) { return nv_warp_max_float(v); }
#else
template <int P, class T> M3IDX_DEV T warp_max(T v) { return warp_fold<P>(v, MAX_OF(T)); }
template <int P, class T> M3IDX_DEV T warp_min(T v) { return warp_fold<P>(v, MIN_OF(T)); }
template <int P> M3IDX_DEV float warp_max_float(float v) {
  return warp_fold<P>(v, [](float x, float y) { return fmaxf(x, y); });
}
#endif

struct alignas(16) warp_query { /* qf is read as float4 */
  float qf[M3IDX_HEAD_DIM];
  int spread;  /* m3idx__spread_allowed of the pair's row */
  float bound; /* lane_filter's error bound for this row; +inf: no filter */
#if defined(M3IDX_HIP_PLATFORM_NVIDIA)
  /* The row cut for the integer filter (fast path; cut_row). */
  alignas(16) int32_t lo[32];
  alignas(16) int32_t hi[32];
  int32_t bias[4];
#endif
};

struct fp64_smem {
  double e2m1[16];  /* code -> value: 16 doubles fill the 32 banks once */
  float e2m1f[16];  /* the same in fp32 for the filter */
  warp_query wq[FP64_WARPS];
};

/* Threads 0..15 write code -> value into table (the caller syncs). */
M3IDX_DEV void fill_e2m1(double *table) {
  if (threadIdx.x < 16)
    table[threadIdx.x] = (double)m3idx__e2m1_value(threadIdx.x);
}

M3IDX_DEV void fill_table(fp64_smem &sm) {
  fill_e2m1(sm.e2m1);
  if (threadIdx.x < 16)
    sm.e2m1f[threadIdx.x] = m3idx__e2m1_value(threadIdx.x);
  __syncthreads();
}

/* The four scale bytes of key t of page. */
M3IDX_DEV uint32_t key_scales(const uint8_t *page, int t) {
  return *(const uint32_t *)(page + M3IDX_PAGE_DATA_BYTES + 4 * t);
}

/* The filter's bound.  key_filter_fp32 sums each group's 32 products q * k in
 * fp32 (k the e2m1 value, unscaled: every product is exact, subnormal
 * sums are exact), then adds the four sums times 2^(e_g - emax).  In units
 * of 2^(emax - 127), emax the page's largest scale byte but 255, D is the
 * same sum done exactly, and the two differ by at most
 * (gamma_32 + gamma_3) * 6 * sum |q| (each group's sum and the final adds,
 * gamma_n = n 2^-24 / (1 - n 2^-24) < 2^-18.8), plus below 2^-140 for scale
 * factors under fp32's normals (flushed to 0: each lost term is below
 * 192 max|q| 2^-126).  FILTER_REL = 2^-17 covers that with the rounding of
 * the fp32 sum |q| itself. */
#define FILTER_REL 0x1p-17f
#define FILTER_ABS 0x1p-140f

/* NVIDIA's fast path sums integers instead (dp4a), as the CPU's vnni
 * kernel does, with its row cut and bound (lib/filter-cut.h). */
template <int P> M3IDX_DEV float filter_bound(float abs_sum) {
  return INT_FILTER(P) ? (float)M3IDX_CUT_ERROR : FILTER_REL * 6.0f * abs_sum + FILTER_ABS;
}


/* The pair's 128 query elements into the warp's buffer, with the row's
 * spread allowance and, on NVIDIA's integer paths, its cut at cut_bits
 * (every lane of the warp takes part). */
template <int P>
M3IDX_DEV void load_query(const gpu_call &c, warp_query &wq, long long pair,
                          int cut_bits = M3IDX_CUT_BITS) {
  const int lane = threadIdx.x & 31;
  int hi = -100000, lo = 100000, special = 0;
  float abs_sum = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const int d = 4 * lane + i;
    const long long at = pair * M3IDX_HEAD_DIM + d;
    const float v = c.query_dtype == M3IDX_DTYPE_BF16 ? m3idx__bf16_value(((const uint16_t *)c.query)[at])
                                 : m3idx__e4m3_value(((const uint8_t *)c.query)[at]);
    wq.qf[d] = v;
    abs_sum += fabsf(v);
    const uint32_t u = f_bits(v) & 0x7fffffffu;
    special |= u >= 0x7f800000u;
    if (u != 0u && u < 0x7f800000u) {
      int32_t h, l;
      m3idx__exponents(v, &h, &l);
      hi = max(hi, (int)h);
      lo = min(lo, (int)l);
    }
  }
  hi = warp_max<P>(hi);
  lo = warp_min<P>(lo);
  special = warp_max<P>(special);
  for (int m = 1; m < 32; m <<= 1)
    abs_sum += M3IDX_SHFL_XOR(abs_sum, m);
#if defined(M3IDX_HIP_PLATFORM_NVIDIA)
  if (INT_FILTER(P))
    cut_row(wq.qf, wq.lo, wq.hi, wq.bias, cut_bits);
#else
  (void)cut_bits;
#endif
  if (lane == 0) {
    wq.spread = m3idx__spread_allowed(hi, lo, special);
    /* NaN or inf elements: no bound (every key is summed exactly). */
    wq.bound = special ? INFINITY : filter_bound<P>(abs_sum);
  }
  M3IDX_SYNCWARP();
}

/* One key's D in fp64, summed by the whole warp: lane l's four elements
 * 4l .. 4l + 3 (group l / 8) times their scale, then a butterfly.  Every
 * partial sum is a sum of some of the key's products, so when the full
 * sum is exact in fp64 (the row's span, the key's spread) so is each. */
M3IDX_DEV double warp_key_dot(const double *e2m1, const warp_query &wq, const uint8_t *key,
                              uint32_t scales) {
  const int lane = threadIdx.x & 31;
  const uint32_t b = *(const uint16_t *)(key + 2 * lane);
  double acc = 0.0;
#pragma unroll
  for (int j = 0; j < 4; j++)
    acc = fma((double)wq.qf[4 * lane + j], e2m1[(b >> (4 * j)) & 15u], acc);
  double d = acc * m3idx__e8m0_double((scales >> (8 * (lane >> 3))) & 255u);
  for (int m = 1; m < 32; m <<= 1)
    d += M3IDX_SHFL_XOR(d, m);
  return d;
}

/* One key's D in fp64, summed by a quad of lanes (lanes 4 k .. 4 k + 3,
 * each its own key and query): lane tig's group tig, four chains of its
 * 32 products, times the group's scale, then two butterfly steps.  Exact
 * where warp_key_dot is (every partial sum is a sum of some of the key's
 * products), and a quarter of its latency a key: the quads of a warp sum
 * eight keys at once. */
M3IDX_DEV double quad_key_dot(const double *e2m1, const warp_query &wq, const uint8_t *key,
                              uint32_t scales) {
  const int tig = threadIdx.x & 3;
  const uint4 raw = *(const uint4 *)(key + 16 * tig);
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
  double acc[4] = {0.0, 0.0, 0.0, 0.0};
#pragma unroll
  for (int j = 0; j < 4; j++) {
    const float4 qa = *(const float4 *)&wq.qf[32 * tig + 8 * j];
    const float4 qb = *(const float4 *)&wq.qf[32 * tig + 8 * j + 4];
    const float q[8] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};
#pragma unroll
    for (int n = 0; n < 8; n++)
      acc[n & 3] = fma((double)q[n], e2m1[(w[j] >> (4 * n)) & 15u], acc[n & 3]);
  }
  double d = ((acc[0] + acc[1]) + (acc[2] + acc[3])) *
             m3idx__e8m0_double((scales >> (8 * tig)) & 255u);
  d += M3IDX_SHFL_XOR(d, 1);
  d += M3IDX_SHFL_XOR(d, 2);
  return d;
}

/* best merged with that of every lane whose number differs from this
 * lane's only in bits log2(from) .. log2(to) - 1 (the lanes that hold the
 * same pair). */
M3IDX_DEV void merge_best_lanes(m3idx__block_best &best, int from, int to, float scale) {
  for (int m = from; m < to; m <<= 1) {
    m3idx__block_best o;
    o.d = M3IDX_SHFL_XOR(best.d, m);
    o.logit = M3IDX_SHFL_XOR(best.logit, m);
    o.have_d = M3IDX_SHFL_XOR(best.have_d, m);
    o.have_logit = M3IDX_SHFL_XOR(best.have_logit, m);
    m3idx__best_merge(&best, &o, scale);
  }
}

/* The same over lanes log2(from) .. 4 (from 1: the whole warp; 4: the
 * eight lanes of the same lane % 4), for lanes that took the same fp64
 * sums: then only a lane's own exact logits (rare) need the merge, and
 * without one in the warp there is none. */
M3IDX_DEV void merge_best_across(m3idx__block_best &best, int from, float scale) {
  if (M3IDX_BALLOT32(best.have_logit) != 0u)
    merge_best_lanes(best, from, 32, scale);
}

/* Which keys a pair's filter passes, from top, its largest A (sign(scale)
 * times the approximation of D).  The key of the largest D has
 * A >= top - 2 bound; |top| 2^-20 more covers the rounding of the
 * subtraction.  No filter (bound +inf), or a NaN or infinite top (fp32
 * overflow), passes every key. */
struct filter_floor {
  float floor;
  bool all;
};

M3IDX_DEV filter_floor floor_of(const warp_query &wq, float top) {
  filter_floor f;
  f.floor = top - (2.0f * wq.bound + fabsf(top) * 0x1p-20f);
  f.all = !(wq.bound < INFINITY) || !(fabsf(top) < INFINITY) || !(f.floor > -INFINITY);
  return f;
}

/* Whether a valid key of approximation a may hold the largest D (a NaN
 * or infinite a always may). */
M3IDX_DEV bool may_hold(const filter_floor &f, float a) {
  return f.all || a >= f.floor || !(fabsf(a) < INFINITY);
}

/* A key that may hold the largest D (its code bytes at data, its scale
 * bytes at sc): true when fp64 sums of it are exact for the pair's row
 * (the caller sums it with the warp), else its exact logit goes into best
 * now (group by group where the row allows). */
M3IDX_DEV bool defer_key_to_fp64(m3idx__block_best &best, const warp_query &wq,
                                 const uint8_t *data, const uint8_t *sc, float scale) {
  if (m3idx__key_spread(sc) <= wq.spread)
    return true;
  m3idx__best_take_logit(&best, m3idx__exact_logit_of_row(wq.qf, wq.spread, data, sc, scale));
  return false;
}

/* The same for key t of page. */
M3IDX_DEV bool defer_to_fp64(m3idx__block_best &best, const warp_query &wq, const uint8_t *page,
                             int t, float scale) {
  return defer_key_to_fp64(best, wq, page + 64 * t, page + M3IDX_PAGE_DATA_BYTES + 4 * t, scale);
}

/* The keys of the bits of pass, each sent to defer(i) (defer_to_fp64 or
 * defer_key_to_fp64 of key i): the result has bit i set for those that
 * go to the fp64 sums. */
template <class Defer> M3IDX_DEV uint32_t fp64_pending(uint32_t pass, Defer defer) {
  uint32_t pending = 0u;
  for (; pass != 0u; pass &= pass - 1u) {
    const int i = __ffs((int)pass) - 1;
    if (defer(i))
      pending |= 1u << i;
  }
  return pending;
}

/* The lane's N keys (key_of(i), approximation a[i], bit i of valid) that
 * pass the floor, found without a branch a key (usually there is none),
 * then each sent to defer_to_fp64: the result has bit i set for those the
 * warp sums in fp64. */
template <int N, class KeyOf>
M3IDX_DEV uint32_t fp64_candidates(m3idx__block_best &best, const warp_query &wq,
                                   const uint8_t *page, uint32_t valid, const float (&a)[N],
                                   const filter_floor &f, float scale, KeyOf key_of) {
  uint32_t pass = 0;
#pragma unroll
  for (int i = 0; i < N; i++)
    pass |= (uint32_t)(((valid >> i) & 1u) && may_hold(f, a[i])) << i;
  return fp64_pending(pass, [&](int i) { return defer_to_fp64(best, wq, page, key_of(i), scale); });
}

/* 2^k in fp32 for k <= 0, 0 below fp32's normals. */
M3IDX_DEV float pow2_f(int k) { return k >= -126 ? bits_f((uint32_t)(k + 127) << 23) : 0.0f; }

/* The factor of group g's sum in the fp32 filter's A: 2^(e_g - emax),
 * e_g the group's byte of a key's scale word. */
M3IDX_DEV float group_scale(uint32_t scales, int g, int emax) {
  return pow2_f((int)((scales >> (8 * g)) & 255u) - emax);
}


/* The largest byte of a key's scale word but 255 (0 if every byte is 255):
 * that key's share of the page's emax. */
M3IDX_DEV int scale_max(uint32_t scales) {
  const uint32_t e = scales & ~m3idx__nan_scale_bytes(scales);
  return max(max((int)(e & 255u), (int)((e >> 8) & 255u)),
             max((int)((e >> 16) & 255u), (int)(e >> 24)));
}

/* The largest scale byte but 255 of the lane's keys lane + 32 i (its share
 * of the page's emax); valid receives bit i for a key that is causal (t <
 * nkeys) and has no NaN scale (whose logit is NaN, ignored).  On NVIDIA
 * the largest of all sixteen bytes comes first, two bytes a compare
 * (DPX): below 255 it is the answer and every causal key is valid, and
 * only a lane with a byte 255 looks at its keys one by one. */
M3IDX_DEV int lane_scale_max(const uint32_t scales[4], int nkeys, int &valid) {
  const int lane = threadIdx.x & 31;
  valid = 0;
#pragma unroll
  for (int i = 0; i < 4; i++)
    valid |= (int)(lane + 32 * i < nkeys) << i;
#if defined(M3IDX_HIP_PLATFORM_NVIDIA)
  const int top = nv_scale_bytes_max(scales);
  if (top < 255)
    return top;
#endif
  int emax = 0;
#pragma unroll
  for (int i = 0; i < 4; i++) {
    emax = max(emax, scale_max(scales[i]));
    if (m3idx__nan_scale_bytes(scales[i]) != 0u)
      valid &= ~(1 << i);
  }
  return emax;
}


/* The scale words of the page's keys lane + 32 i, i = 0 .. 3 (lane: of
 * 32), into scales. */
M3IDX_DEV void lane_page_scales(const uint8_t *page, uint32_t scales[4]) {
#pragma unroll
  for (int i = 0; i < 4; i++)
    scales[i] = key_scales(page, (threadIdx.x & 31) + 32 * i);
}

/* The page's largest scale byte but 255 (0 if every byte is 255), over
 * all its 128 keys, from the scale words each lane of the warp holds
 * (lane_page_scales), or read here. */
template <int P> M3IDX_DEV int page_emax_of(const uint32_t scales[4]) {
  int valid;
  return warp_max<P>(lane_scale_max(scales, 128, valid));
}
template <int P> M3IDX_DEV int page_emax(const uint8_t *page) {
  uint32_t scales[4];
  lane_page_scales(page, scales);
  return page_emax_of<P>(scales);
}

/* The values of the 8 codes of word w, element order (code n in nibble
 * n): from the table, or on gfx950's fast path two a byte from
 * v_cvt_scalef32_pk_f32_fp4 with scale 1 (exact: every e2m1 value is an
 * fp32), its low nibble first. */
template <int P> M3IDX_DEV void code_values(const fp64_smem &sm, uint32_t w, float v[8]) {
#if defined(__gfx950__)
  if (GFX950_OPS(P)) {
    gfx950_code_values(w, v);
    return;
  }
#endif
#pragma unroll
  for (int n = 0; n < 8; n++)
    v[n] = sm.e2m1f[(w >> (4 * n)) & 15u];
}

/* A of one key (see FILTER_REL): unscaled fp32 group sums, each times
 * 2^(e_g - emax), in units of 2^(emax - 127). */
template <int P>
M3IDX_DEV float key_filter_fp32(const fp64_smem &sm, const warp_query &wq, const uint8_t *key,
                                uint32_t scales, int emax) {
  float a = 0.0f;
#pragma unroll
  for (int g = 0; g < 4; g++) {
    const uint4 raw = *(const uint4 *)(key + 16 * g);
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      float k[8];
      code_values<P>(sm, path_word<P>(w[i]), k);
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const float4 q = *(const float4 *)&wq.qf[32 * g + 8 * i + 4 * h];
        const float qq[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
        for (int j = 0; j < 4; j++)
          acc = fmaf(qq[j], k[4 * h + j], acc);
      }
    }
    a = a + acc * group_scale(scales, g, emax);
  }
  return a;
}

/* Group 0's code words of the lane's keys, for NVIDIA's integer filter:
 * loaded before the scale factors, whose page maximum the filter waits
 * for, so that the two loads share one trip to memory. */
template <int P, bool STAGED>
M3IDX_DEV void lane_first_words(const uint8_t *page, uint4 first[4]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < 4; i++)
    first[i] = INT_FILTER(P) && !STAGED ? *(const uint4 *)(page + 64 * (lane + 32 * i)) : uint4{};
}

/* A of the lane's keys lane + 32 i, i = 0 .. 3, as sign * A, or -inf
 * for a key that valid leaves out (past the causal end, a NaN scale) and
 * for every key when the pair has no filter. */
template <int P, bool STAGED>
M3IDX_DEV void lane_filter(const fp64_smem &sm, const warp_query &wq, const uint8_t *page,
                           const uint4 first[4], const uint32_t scales[4], int emax, int valid,
                           float sign, float a[4]) {
  const bool filter = wq.bound < INFINITY;
#if defined(M3IDX_HIP_PLATFORM_NVIDIA)
  if (INT_FILTER(P)) {
    if (filter)
      lane_filter_int<P, STAGED>(wq.lo, wq.hi, wq.bias, page, first, scales, emax, a);
#pragma unroll
    for (int i = 0; i < 4; i++)
      a[i] = filter && ((valid >> i) & 1) ? sign * a[i] : -INFINITY;
    return;
  }
#endif
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < 4; i++)
    a[i] = filter && ((valid >> i) & 1)
               ? sign * key_filter_fp32<P>(sm, wq, page + 64 * (lane + 32 * i), scales[i], emax)
               : -INFINITY;
}

/* The best of the page's first nkeys keys against the warp's pair, the
 * same in every lane.  STAGED: the page is in shared memory
 * (score-staged.hip). */
template <int P, bool STAGED>
M3IDX_DEV m3idx__block_best pair_best(const gpu_call &c, const fp64_smem &sm,
                                      const warp_query &wq, const uint8_t *page, int nkeys) {
  const int lane = threadIdx.x & 31;
  uint4 first[4];
  lane_first_words<P, STAGED>(page, first);
  uint32_t scales[4];
#pragma unroll
  for (int i = 0; i < 4; i++)
    scales[i] = key_scales(page, lane + 32 * i);
  int valid;
  const int emax = warp_max<P>(lane_scale_max(scales, nkeys, valid));
  /* The filter looks for the largest of sign(scale) * D. */
  const float sign = c.scale < 0.0f ? -1.0f : 1.0f;
  float a[4];
  lane_filter<P, STAGED>(sm, wq, page, first, scales, emax, valid, sign, a);
  float top = fmaxf(fmaxf(a[0], a[1]), fmaxf(a[2], a[3]));
  top = warp_max_float<P>(top);
  const filter_floor f = floor_of(wq, top);
  m3idx__block_best best;
  m3idx__best_start(&best);
  const uint32_t pending = fp64_candidates(best, wq, page, (uint32_t)valid, a, f, c.scale,
                                           [lane](int i) { return lane + 32 * i; });
  /* The pending keys one at a time, lane by lane, each summed by the
     whole warp (usually one a page; a lane alone took 128 dependent
     fp64 multiply-adds).  The block keeps the largest D whatever the
     order, so one ballot finds the lanes that have any. */
  for (uint32_t any = M3IDX_BALLOT32(pending != 0u); any != 0u; any &= any - 1u) {
    const int src = __ffs((int)any) - 1;
    for (uint32_t m = (uint32_t)M3IDX_SHFL32((int)pending, src); m != 0u; m &= m - 1u) {
      const int t = src + 32 * (__ffs((int)m) - 1);
      m3idx__best_take_d(&best, warp_key_dot(sm.e2m1, wq, page + 64 * t, key_scales(page, t)),
                         c.scale);
    }
  }
  merge_best_across(best, 1, c.scale); /* every lane took the same fp64 sums */
  return best;
}

/* Block b of the page against the warp's pair, whose row sees its first
 * nkeys keys; the block score goes to (head, row). */
template <int P>
M3IDX_DEV void score_pair(const gpu_call &c, const fp64_smem &sm, const warp_query &wq,
                          const uint8_t *page, int nkeys, int head, int row, int b) {
  const m3idx__block_best best = pair_best<P, false>(c, sm, wq, page, nkeys);
  if ((threadIdx.x & 31) == 0)
    store_score(c, head, row, b, m3idx__best_logit(&best, c.scale));
}

#endif /* M3IDX_GPU_SCORE_PARTS_H */
