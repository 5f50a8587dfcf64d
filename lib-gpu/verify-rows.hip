/*
 * verify-rows.hip - m3idx_verify_topk's verdicts on the device: one block
 * of threads a (row, head) pair, after the scoring kernel has left the
 * exact scores in scratch; the block pins them and takes their top-k
 * (select-row.h) itself, then decides, so that a call waits once.  The
 * pieces are lib/verify-row.h's, as on the host; the threads combine them
 * with exact minima and maxima only, so the verdicts are the host's bits.
 *
 * A block's bound terms are computed only when a verdict depends on them,
 * as the host does in rounds: a candidate score is first held against
 * the interval that its reference score alone gives (never wider than the
 * true one).  For the largest deviation every block's terms are computed
 * first (all_terms_kernel).
 *
 * SPDX-License-Identifier: MIT
 */
#include "device-math.h"
#include "kernels.h"
#include "select-row.h"
#include "verify-row.h"

#define VERIFY_THREADS SELECT_THREADS
#define VERIFY_WARPS (VERIFY_THREADS / 32)
#define VERIFY_LIST 64          /* blocks whose terms one pass computes */
#define NO_BLOCK 0x7fffffff

#define TIGHT_DONE 1u           /* done[]: terms taken for the scores */
#define BEATS_DONE 2u           /* done[]: terms taken for the set check */

/* A row's integers qi (lib/verify-rules.h), and on NVIDIA the same as
 * bytes, low and high, four elements a word, for dp4a (key_group_ints). */
struct row_ints_t {
  uint32_t qi[M3IDX_HEAD_DIM];
  uint32_t lo[M3IDX_HEAD_DIM / 4], hi[M3IDX_HEAD_DIM / 4];
};

struct verify_smem {
  row_ints_t q;
  float amax_part[M3IDX_HEAD_DIM];
  int32_t cand[M3IDX_TOPK];
  int32_t list[VERIFY_LIST];
  unsigned long long terms[VERIFY_LIST][2]; /* the bits of non-negative A, K */
  m3idx_verify_interval taken[M3IDX_TOPK];
  m3idx_verify_interval best_iv[VERIFY_WARPS];
  int32_t best_b[VERIFY_WARPS];
  double best_dev[VERIFY_WARPS];
  unsigned long long dev_bits;  /* the row's largest deviation known */
  double amax, ahi;
  int32_t n, req, pos, shift, list_n, missing, first_slot, reason, slot, block_a, block_b,
      differs, ja;
  float gap;
};

#if defined(M3IDX_HIP_PLATFORM_NVIDIA)
/* A key's group integers gq = sum qi[d] |halves(d)| and gk = sum
 * |halves(d)| (codes: its 64 bytes): prmt looks the code's magnitude up
 * in halves, four a word, and dp4a sums the products with qi's low and
 * high bytes (qi < 2^16, so gq = 256 hi + lo exactly); the integers are
 * m3idx__verify_key_terms's. */
M3IDX_DEV void key_group_ints(const row_ints_t &q, const uint32_t *codes, uint32_t *gq,
                              uint32_t *gk) {
  for (int g = 0; g < 4; g++) {
    uint32_t lo = 0, hi = 0, k = 0;
    for (int j = 0; j < 8; j++) { /* half-words of 4 codes */
      const uint32_t w = codes[4 * g + j / 2] >> (16 * (j % 2));
      const uint32_t m = __byte_perm(0x03020100u, 0x0c080604u, w & 0x7777u);
      lo = __dp4a(m, q.lo[8 * g + j], lo);
      hi = __dp4a(m, q.hi[8 * g + j], hi);
      k = __dp4a(m, 0x01010101u, k);
    }
    gq[g] = (hi << 8) + lo;
    gk[g] = k;
  }
}
#endif

/* The largest terms of the warp's 32 keys, in every lane: lane l takes
 * key `key' (live: a causal key of the valid page pg) whole, its bytes
 * read 16 at a time, every lane reading the same query word at once;
 * terms start from 0, as m3idx__verify_block_terms's do. */
M3IDX_DEV void warp_key_terms(const row_ints_t &q, int32_t shift, const uint8_t *pg, int key,
                              int live, double *a_out, double *k_out) {
  double a = 0.0, k = 0.0;
  if (live) {
    uint32_t codes[16];
    for (int j = 0; j < 4; j++) {
      const uint4 w = *(const uint4 *)(pg + 64 * key + 16 * j);
      codes[4 * j] = w.x;
      codes[4 * j + 1] = w.y;
      codes[4 * j + 2] = w.z;
      codes[4 * j + 3] = w.w;
    }
    const uint32_t sc = *(const uint32_t *)(pg + M3IDX_PAGE_DATA_BYTES + 4 * key);
    uint8_t scales[4];
    memcpy(scales, &sc, sizeof scales);
    double kt[2];
#if defined(M3IDX_HIP_PLATFORM_NVIDIA)
    uint32_t gq[4], gk[4];
    key_group_ints(q, codes, gq, gk);
    m3idx__verify_key_combine(gq, gk, shift, scales, kt);
#else
    uint8_t bytes[64];
    memcpy(bytes, codes, sizeof bytes);
    m3idx__verify_key_terms(q.qi, shift, bytes, scales, kt); /* the rule itself */
#endif
    a = kt[0] > 0.0 ? kt[0] : 0.0;
    k = kt[1] > 0.0 ? kt[1] : 0.0;
  }
  for (int m = 1; m < 32; m <<= 1) {
    const double oa = M3IDX_SHFL_XOR(a, m), ok = M3IDX_SHFL_XOR(k, m);
    a = oa > a ? oa : a;
    k = ok > k ? ok : k;
  }
  *a_out = a;
  *k_out = k;
}

/* Element threadIdx.x (< 128) of the pair's query row, its magnitude
 * (a NaN kept) into part[threadIdx.x]; 0 for the other threads. */
M3IDX_DEV float query_element(const gpu_call &c, int row, int h, float *part) {
  const int t = threadIdx.x;
  if (t >= M3IDX_HEAD_DIM)
    return 0.0f;
  const long long e = ((long long)row * c.num_heads + h) * M3IDX_HEAD_DIM + t;
  const float v = c.query_dtype == M3IDX_DTYPE_BF16
                      ? m3idx__bf16_value(((const uint16_t *)c.query)[e])
                      : m3idx__e4m3_value(((const uint8_t *)c.query)[e]);
  part[t] = v != v ? v : fabsf(v);
  return v;
}

/* The row's integers and shift (lib/verify-rules.h) into q and the
 * return value, and its largest magnitude into *amax, from each thread's
 * query_element v and the magnitudes in part (folded here).  Every
 * thread calls. */
M3IDX_DEV int32_t row_ints(float v, row_ints_t &q, float *part, float *amax) {
  const int t = threadIdx.x;
  __syncthreads();
  for (int w = M3IDX_HEAD_DIM / 2; w > 0; w /= 2) { /* the row's largest, a NaN kept */
    if (t < w) {
      const float a = part[t], b = part[t + w];
      part[t] = b > a || b != b ? b : a;
    }
    __syncthreads();
  }
  *amax = part[0];
  const int32_t shift = m3idx__verify_shift(part[0]);
  if (t < M3IDX_HEAD_DIM)
    q.qi[t] = shift == M3IDX_VERIFY_NO_SHIFT ? 0u : m3idx__verify_query_int(v, shift);
  __syncthreads();
#if defined(M3IDX_HIP_PLATFORM_NVIDIA)
  if (t < M3IDX_HEAD_DIM / 4) {
    uint32_t lo = 0, hi = 0;
    for (int i = 0; i < 4; i++) {
      lo |= (q.qi[4 * t + i] & 0xffu) << (8 * i);
      hi |= (q.qi[4 * t + i] >> 8) << (8 * i);
    }
    q.lo[t] = lo;
    q.hi[t] = hi;
  }
  __syncthreads();
#endif
  return shift;
}

/* The terms of the listed blocks (got of them), a warp 32 keys of one
 * block, each block's largest kept in shared memory as bits (non-negative
 * doubles order as their bits). */
M3IDX_DEV void list_terms(verify_smem &sm, const gpu_call &c, int got) {
  for (int i = threadIdx.x; i < 2 * got; i += VERIFY_THREADS)
    sm.terms[i / 2][i % 2] = 0;
  __syncthreads();
  const int items = got * M3IDX_BLOCK_SIZE; /* whole warps */
  for (int it = threadIdx.x; it < items; it += VERIFY_THREADS) {
    const int i = it / M3IDX_BLOCK_SIZE, key = it % M3IDX_BLOCK_SIZE;
    const int32_t b = sm.list[i];
    const uint8_t *pg = page_of(c, sm.req, b);
    double a, k;
    warp_key_terms(sm.q, sm.shift, pg, key,
                   pg != nullptr && key <= sm.pos - b * M3IDX_BLOCK_SIZE, &a, &k);
    if ((threadIdx.x & 31) == 0) {
      atomicMax(&sm.terms[i][0], (unsigned long long)m3idx__double_to_bits(a));
      atomicMax(&sm.terms[i][1], (unsigned long long)m3idx__double_to_bits(k));
    }
  }
  __syncthreads();
}

#define TERM(i, j) m3idx__bits_to_double(sm.terms[i][j])

/* The listed blocks' count, once every thread has listed (at most the
 * list's room; the rest are listed again in the next pass). */
M3IDX_DEV int listed(verify_smem &sm) {
  __syncthreads();
  return min(sm.list_n, VERIFY_LIST);
}

M3IDX_DEV void list_add(verify_smem &sm, int32_t b) {
  const int i = atomicAdd(&sm.list_n, 1);
  if (i < VERIFY_LIST)
    sm.list[i] = b;
}

/* Passes over a row's n blocks until none is listed: want(b, pass) says
 * whether block b needs its terms (and handles a block that does not);
 * use(b, A, K) takes the terms of each listed one, which `mark' in done
 * keeps from being listed again (the list holds VERIFY_LIST a pass). */
template <class Want, class Use>
M3IDX_DEV void in_passes(verify_smem &sm, const gpu_call &c, int32_t n, uint8_t *done,
                         uint8_t mark, Want want, Use use) {
  const int t = threadIdx.x;
  for (int pass = 0;; pass++) {
    if (t == 0)
      sm.list_n = 0;
    __syncthreads();
    for (int32_t b = t; b < n; b += VERIFY_THREADS)
      if (!(done[b] & mark) && want(b, pass))
        list_add(sm, b);
    const int got = listed(sm);
    if (got == 0)
      break;
    list_terms(sm, c, got);
    __syncthreads();
    if (t < got) {
      const int32_t b = sm.list[t];
      use(b, TERM(t, 0), TERM(t, 1));
      done[b] |= mark;
    }
    __syncthreads();
  }
}

struct verify_args {
  float *ref;                 /* [pairs, width]: exact scores, pinned here */
  int32_t *ref_ids;           /* [pairs, 16]: their top-k, taken here */
  const int32_t *cand;        /* [pairs, 16] */
  const float *cand_scores;   /* [pairs, cand_stride] or NULL */
  long long cand_stride;
  const double *terms;        /* [pairs, width, 2]: every block's, or NULL */
  m3idx_verify_row *rows;     /* [pairs] */
  double *row_dev;            /* [pairs]: the row's largest deviation */
  unsigned *err_seen;         /* [pairs]: the error word as each block saw it at its end */
  uint8_t *done;              /* [pairs, width] */
};

__global__ void __launch_bounds__(VERIFY_THREADS)
    verify_rows_kernel(const gpu_call c, const verify_args v, const m3idx_verify_options o) {
  __shared__ verify_smem sm;
  __shared__ select_smem ssm;
  const int row = blockIdx.x, h = blockIdx.y, t = threadIdx.x;
  const long long hr = (long long)h * c.num_rows + row;
  /* Every read that depends on nothing at once: lengths, ids, query. */
  if (t == 0) {
    sm.n = row_blocks(c, row, &sm.pos, &sm.req);
    sm.dev_bits = 0;
    sm.missing = NO_BLOCK;
    sm.first_slot = NO_BLOCK;
    sm.differs = 0;
  }
  if (t < M3IDX_TOPK)
    sm.cand[t] = v.cand[hr * M3IDX_TOPK + t];
  const float qv = query_element(c, row, h, sm.amax_part);
  __syncthreads();
  select_row(ssm, c, sm.n, row, h, v.ref, 1, 1, v.ref_ids); /* m3idx's top-k, pinned scores */
  __syncthreads();
  const int32_t n = sm.n;
  if (n < 0) { /* bad lengths: reported, nothing written */
    if (t == 0)
      v.err_seen[hr] = atomicOr(c.err, 0u);
    return;
  }
  float amax_f;
  const int32_t shift = row_ints(qv, sm.q, sm.amax_part, &amax_f);
  if (t == 0) {
    sm.shift = shift;
    sm.amax = amax_f;
  }
  /* The slots' own checks, the first slot at fault, and whether the ids
     are m3idx's. */
  int32_t slot_reason = M3IDX_REASON_NONE;
  if (t < M3IDX_TOPK) {
    slot_reason = m3idx__verify_slot(sm.cand, n, t);
    if (slot_reason != M3IDX_REASON_NONE)
      atomicMin(&sm.first_slot, t);
    if (sm.cand[t] != v.ref_ids[hr * M3IDX_TOPK + t])
      sm.differs = 1;
  }
  __syncthreads();
  if (t == 0 && sm.first_slot == NO_BLOCK) {
    sm.reason = M3IDX_REASON_NONE;
    sm.slot = sm.block_a = -1;
  }
  if (t == sm.first_slot) {
    sm.reason = slot_reason;
    sm.slot = t;
    sm.block_a = sm.cand[t];
  }
  __syncthreads();
  const int32_t count = n < M3IDX_TOPK ? n : M3IDX_TOPK;
  if (sm.reason == M3IDX_REASON_NONE) { /* the forced blocks, the first missing */
    const int32_t forced = m3idx__verify_forced_count(n, c.init_blocks, c.local_blocks);
    for (int32_t i = t; i < forced; i += VERIFY_THREADS) {
      const int32_t b = m3idx__verify_forced_block(i, n, c.init_blocks, c.local_blocks);
      if (!m3idx__verify_taken(sm.cand, count, b))
        atomicMin(&sm.missing, b);
    }
  }
  __syncthreads();
  if (t == 0 && sm.missing != NO_BLOCK) {
    sm.reason = M3IDX_REASON_FORCED;
    sm.slot = -1;
    sm.block_a = sm.missing;
  }
  __syncthreads();
  const float *rf = v.ref + hr * c.width;
  uint8_t *dn = v.done + hr * c.width;
  for (int32_t b = t; b < n; b += VERIFY_THREADS)
    dn[b] = 0;
  __syncthreads();
  const double amax = sm.amax;
#define INTERVAL(x, forced, a, k) m3idx__verify_interval((x), (forced), (a), (k), amax, c.scale, &o)
#define FORCED(b) m3idx__verify_is_forced((b), n, c.init_blocks, c.local_blocks)

  /* The candidate's scores: the first block outside its interval, and the
     largest deviation (from every block's terms, computed before). */
  int32_t my_bad = NO_BLOCK;
  double my_bad_dev = 0.0, my_dev = 0.0; /* deviations are >= 0: their bits order them */
  const int want_inside = sm.reason == M3IDX_REASON_NONE;
  const int want_dev = !(o.flags & M3IDX_VERIFY_NO_MAX_DEVIATION);
  if (v.cand_scores != NULL) {
    const float *cs = v.cand_scores + hr * v.cand_stride;
    auto note = [&](int32_t b, const m3idx_verify_interval &iv, double s) {
      const double dev = m3idx__verify_deviation(s, &iv);
      my_dev = dev > my_dev ? dev : my_dev;
      if (!m3idx__verify_inside(s, &iv) && b < my_bad) {
        my_bad = b;
        my_bad_dev = dev;
      }
    };
    const double *tm = v.terms != NULL ? v.terms + 2 * hr * c.width : NULL;
    for (int32_t b = t; tm != NULL && b < n; b += VERIFY_THREADS) /* every block's terms */
      if (!FORCED(b))
        note(b, INTERVAL(rf[b], 0, tm[2 * b], tm[2 * b + 1]), m3idx__verify_rank(cs[b]));
    if (tm == NULL)
      in_passes(
          sm, c, n, dn, TIGHT_DONE,
          [&](int32_t b, int pass) {
            const float x = rf[b];
            const double s = m3idx__verify_rank(cs[b]);
            if (FORCED(b))
              return false;
            if (m3idx__verify_fixed(x, 0)) {
              if (pass == 0)
                note(b, INTERVAL(x, 0, 0.0, 0.0), s);
              return false;
            }
            if (!want_inside || m3idx__verify_near(x, cs[b], c.scale))
              return false;
            const m3idx_verify_interval f = m3idx__verify_score_floor(x, 0, amax, c.scale, &o);
            return !m3idx__verify_inside(s, &f);
          },
          [&](int32_t b, double a, double k) {
            note(b, INTERVAL(rf[b], 0, a, k), m3idx__verify_rank(cs[b]));
          });
  }
  for (int m = 1; m < 32; m <<= 1) { /* the first block outside, its deviation; the largest */
    const int32_t ob = M3IDX_SHFL_XOR(my_bad, m);
    const double od = M3IDX_SHFL_XOR(my_bad_dev, m), om = M3IDX_SHFL_XOR(my_dev, m);
    if (ob < my_bad) {
      my_bad = ob;
      my_bad_dev = od;
    }
    my_dev = om > my_dev ? om : my_dev;
  }
  if ((t & 31) == 0) {
    sm.best_b[t / 32] = my_bad;
    sm.best_dev[t / 32] = my_bad_dev;
    atomicMax(&sm.dev_bits, (unsigned long long)m3idx__double_to_bits(my_dev));
  }
  __syncthreads();
  if (t == 0) {
    for (int i = 1; i < VERIFY_WARPS; i++)
      if (sm.best_b[i] < sm.best_b[0]) {
        sm.best_b[0] = sm.best_b[i];
        sm.best_dev[0] = sm.best_dev[i];
      }
    sm.list_n = 0;
  }
  __syncthreads();
  const int32_t bad = sm.best_b[0];
  const double bad_dev = sm.best_dev[0];
  __syncthreads();

  /* The set: the taken block of the lowest possible best against the
     left-out block of the highest possible worst (SPEC section 13). */
  if (sm.reason == M3IDX_REASON_NONE && sm.differs) {
    if (t < count && !m3idx__verify_fixed(rf[sm.cand[t]], FORCED(sm.cand[t])))
      list_add(sm, sm.cand[t]);
    const int got = listed(sm);
    list_terms(sm, c, got);
    __syncthreads();
    if (t < count) {
      const int32_t b = sm.cand[t];
      double a = 0.0, k = 0.0;
      for (int i = 0; i < got; i++)
        if (sm.list[i] == b) {
          a = TERM(i, 0);
          k = TERM(i, 1);
        }
      sm.taken[t] = INTERVAL(rf[b], FORCED(b), a, k);
    }
    __syncthreads();
    if (t == 0) {
      int ja = 0;
      for (int j = 1; j < count; j++)
        if (sm.taken[j].hi < sm.taken[ja].hi)
          ja = j;
      sm.ja = ja;
      sm.ahi = sm.taken[ja].hi;
    }
    __syncthreads();
    const double ahi = sm.ahi;
    int32_t bb = -1;
    m3idx_verify_interval biv = {0.0, 0.0, 0.0, 0.0};
    /* The host's choice: the highest lo, the first block among equals. */
    auto consider = [&](int32_t b, const m3idx_verify_interval &iv) {
      if (b >= 0 && (bb < 0 || iv.lo > biv.lo || (iv.lo == biv.lo && b < bb))) {
        bb = b;
        biv = iv;
      }
    };
    in_passes(
        sm, c, n, dn, BEATS_DONE,
        [&](int32_t b, int pass) {
          const float x = rf[b];
          if (!(m3idx__verify_rank(x) > ahi) || m3idx__verify_taken(sm.cand, count, b))
            return false;
          if (!m3idx__verify_fixed(x, FORCED(b)))
            return true;
          if (pass == 0)
            consider(b, INTERVAL(x, FORCED(b), 0.0, 0.0));
          return false;
        },
        [&](int32_t b, double a, double k) { consider(b, INTERVAL(rf[b], 0, a, k)); });
    for (int m = 1; m < 32; m <<= 1) {
      m3idx_verify_interval o2;
      const int32_t ob = M3IDX_SHFL_XOR(bb, m);
      o2.lo = M3IDX_SHFL_XOR(biv.lo, m);
      o2.hi = M3IDX_SHFL_XOR(biv.hi, m);
      o2.x = M3IDX_SHFL_XOR(biv.x, m);
      o2.e = M3IDX_SHFL_XOR(biv.e, m);
      consider(ob, o2);
    }
    if ((t & 31) == 0) {
      sm.best_b[t / 32] = bb;
      sm.best_iv[t / 32] = biv;
    }
    __syncthreads();
    if (t == 0) {
      for (int i = 0; i < VERIFY_WARPS; i++)
        consider(sm.best_b[i], sm.best_iv[i]);
      const m3idx_verify_interval &ia = sm.taken[sm.ja];
      if (bb >= 0 && biv.lo > ia.hi) {
        sm.reason = M3IDX_REASON_SET;
        sm.slot = sm.ja;
        sm.block_a = sm.cand[sm.ja];
        sm.block_b = bb;
        sm.gap = m3idx__verify_gap(&ia, &biv);
      } else if (o.order == M3IDX_ORDER_DESC) {
        for (int j = 0; j + 1 < count; j++)
          if (sm.taken[j + 1].lo > sm.taken[j].hi) {
            sm.reason = M3IDX_REASON_ORDER;
            sm.slot = j;
            sm.block_a = sm.cand[j];
            sm.block_b = sm.cand[j + 1];
            sm.gap = m3idx__verify_gap(&sm.taken[j], &sm.taken[j + 1]);
            break;
          }
      }
    }
  }
#undef INTERVAL
#undef FORCED
  if (t == 0) {
    m3idx_verify_row out;
    out.reason = sm.reason;
    out.slot = sm.slot;
    out.block_a = sm.block_a;
    out.block_b = -1;
    out.gap = 0.0f;
    if (out.reason == M3IDX_REASON_SET || out.reason == M3IDX_REASON_ORDER) {
      out.block_b = sm.block_b;
      out.gap = sm.gap;
    } else if (out.reason == M3IDX_REASON_NONE && bad != NO_BLOCK) {
      out.reason = M3IDX_REASON_SCORE;
      out.slot = -1;
      out.block_a = bad;
      out.gap = (float)bad_dev;
    }
    out.verdict = out.reason != M3IDX_REASON_NONE ? M3IDX_VERDICT_WRONG
                : !sm.differs                     ? M3IDX_VERDICT_EXACT
                                                  : M3IDX_VERDICT_EQUIVALENT;
    v.rows[hr] = out;
    v.row_dev[hr] = want_dev ? m3idx__bits_to_double(sm.dev_bits) : 0.0;
  }
  /* What the earlier kernels and this block reported: the word the host
     reads with the rows, so that one copy brings both. */
  __syncthreads();
  if (t == 0)
    v.err_seen[hr] = atomicOr(c.err, 0u);
}

/* Every block's terms, for the largest deviation: a launch block
 * TERMS_BLOCKS blocks of one row, as list_terms takes them. */
#define TERMS_BLOCKS 32

__global__ void __launch_bounds__(VERIFY_THREADS) all_terms_kernel(const gpu_call c,
                                                                   double *terms) {
  __shared__ row_ints_t q;
  __shared__ float part[M3IDX_HEAD_DIM];
  __shared__ unsigned long long best[TERMS_BLOCKS][2];
  __shared__ int32_t n_s, pos_s, req_s;
  const long long hr = blockIdx.x;
  const int h = (int)(hr / c.num_rows), row = (int)(hr % c.num_rows), t = threadIdx.x;
  if (t == 0)
    n_s = row_blocks(c, row, &pos_s, &req_s);
  if (t < 2 * TERMS_BLOCKS)
    best[t / 2][t % 2] = 0;
  __syncthreads();
  const int32_t b0 = (int32_t)blockIdx.y * TERMS_BLOCKS, blocks = min(TERMS_BLOCKS, n_s - b0);
  if (blocks <= 0)
    return;
  float amax;
  const int32_t shift = row_ints(query_element(c, row, h, part), q, part, &amax);
  for (int it = t; it < blocks * M3IDX_BLOCK_SIZE; it += VERIFY_THREADS) {
    const int i = it / M3IDX_BLOCK_SIZE, key = it % M3IDX_BLOCK_SIZE;
    const uint8_t *pg = page_of(c, req_s, b0 + i);
    double a, k;
    warp_key_terms(q, shift, pg, key, pg != nullptr && key <= pos_s - (b0 + i) * M3IDX_BLOCK_SIZE,
                   &a, &k);
    if ((t & 31) == 0) {
      atomicMax(&best[i][0], (unsigned long long)m3idx__double_to_bits(a));
      atomicMax(&best[i][1], (unsigned long long)m3idx__double_to_bits(k));
    }
  }
  __syncthreads();
  if (t < 2 * blocks)
    terms[(hr * c.width + b0) * 2 + t] = m3idx__bits_to_double(best[t / 2][t % 2]);
}

hipError_t m3idx_gpu_verify_rows(const gpu_call &c, float *ref, int32_t *ref_ids,
                                 const int32_t *cand, const float *cand_scores,
                                 long long cand_stride, const m3idx_verify_options *o,
                                 m3idx_verify_row *rows, double *row_dev, unsigned *err_seen,
                                 uint8_t *done, double *terms, hipStream_t s) {
  if (c.num_rows == 0 || c.num_heads == 0)
    return hipSuccess;
  if (terms != NULL) {
    hipLaunchKernelGGL(all_terms_kernel,
                       dim3((unsigned)((long long)c.num_rows * c.num_heads),
                            (unsigned)((c.width + TERMS_BLOCKS - 1) / TERMS_BLOCKS)),
                       dim3(VERIFY_THREADS), 0, s, c, terms);
    const hipError_t e = hipGetLastError();
    if (e != hipSuccess)
      return e;
  }
  const verify_args v = {ref, ref_ids, cand, cand_scores, cand_stride, terms, rows, row_dev,
                         err_seen, done};
  hipLaunchKernelGGL(verify_rows_kernel, dim3(c.num_rows, c.num_heads),
                     dim3(VERIFY_THREADS), 0, s, c, v, *o);
  return hipGetLastError();
}
