/*
 * oracle.c - the tests' independent oracle (see oracle.h).
 *
 * SPDX-License-Identifier: MIT
 */
#include <gmp.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "oracle.h"

float oracle_bf16(uint16_t x) {
  uint32_t u = (uint32_t)x << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

float oracle_e4m3(uint8_t x) {
  int s = x >> 7, e = (x >> 3) & 15, m = x & 7;
  if (e == 15 && m == 7)
    return NAN;
  float v = e == 0 ? ldexpf((float)m / 8.0f, -6) : ldexpf(1.0f + (float)m / 8.0f, e - 7);
  return s ? -v : v;
}

float oracle_e2m1(unsigned code) {
  int s = (code >> 3) & 1, e = (code >> 1) & 3, m = code & 1;
  float v = e == 0 ? 0.5f * (float)m : ldexpf(1.0f + 0.5f * (float)m, e - 1);
  return s ? -v : v;
}

float oracle_e8m0(unsigned e) {
  return e == 255 ? NAN : ldexpf(1.0f, (int)e - 127);
}

int oracle_width(const struct oracle_call *c) {
  return (c->max_seq_len + 127) / 128;
}

static int row_request(const struct oracle_call *c, int row) {
  if (c->mode == 1)
    return row / c->query_len;
  int r = 0;
  while (c->cu_seqlens_q[r + 1] <= row)
    r++;
  return r;
}

int oracle_row_pos(const struct oracle_call *c, int row) {
  int r = row_request(c, row);
  if (c->mode == 1)
    return c->seq_lens[r] - c->query_len + row % c->query_len;
  return c->context_lens[r] + (row - c->cu_seqlens_q[r]);
}

int oracle_row_blocks(const struct oracle_call *c, int row) {
  return oracle_row_pos(c, row) / 128 + 1;
}

static float query_elem(const struct oracle_call *c, int row, int h, int d) {
  size_t i = ((size_t)row * c->num_heads + h) * 128 + d;
  return c->dtype == 1 ? oracle_bf16(((const uint16_t *)c->query)[i])
                       : oracle_e4m3(((const uint8_t *)c->query)[i]);
}

/* Token p of request r, decoded: 128 e2m1 values and 4 scales. */
static void decode_token(const struct oracle_call *c, int r, int p, float *k,
                         float *sc) {
  int page = c->block_table[(size_t)r * c->bt_stride + p / 128];
  const uint8_t *pg = c->pages + (size_t)page * 8704;
  int slot = p % 128;
  for (int d = 0; d < 128; d++) {
    uint8_t byte = pg[64 * slot + d / 2];
    k[d] = oracle_e2m1(d % 2 == 0 ? (byte & 15u) : (byte >> 4));
  }
  for (int g = 0; g < 4; g++)
    sc[g] = oracle_e8m0(pg[8192 + 4 * slot + g]);
}

/* x as m * 2^e with m an integer below 2^24 (x finite). */
static unsigned long int_form(float x, long *e) {
  int ex;
  float f = frexpf(fabsf(x), &ex); /* f in [0.5, 1) */
  *e = (long)ex - 24;
  return (unsigned long)ldexpf(f, 24);
}

#define BASE 400 /* D is kept as N * 2^-BASE: every finite product is a multiple */

/* SPEC section 4 from its definition: D = sum q[d] * k[d] in exact
 * rational arithmetic (GMP integers over a power of two), then scale * D
 * rounded once to fp32, nearest even, as the standard's rounding is
 * described: the 24 leading bits (fewer below 2^-126), then the rest
 * compared with half a unit. */
static float logit_of(const struct oracle_call *c, const float *q,
                      const float *k, const float *sc) {
  /* The row's elements as odd m * 2^e, kept while the next key has the
     same row (oracle_scores calls this key by key). */
  static float last_q[128];
  static unsigned long qm[128];
  static long qe[128];
  static int have_q;
  if (!have_q || memcmp(last_q, q, sizeof last_q) != 0) {
    for (int d = 0; d < 128; d++) {
      qm[d] = isfinite(q[d]) && q[d] != 0.0f ? int_form(q[d], &qe[d]) : 0u;
      if (qm[d]) {
        const int z = __builtin_ctzl(qm[d]);
        qm[d] >>= z;
        qe[d] += z;
      }
    }
    memcpy(last_q, q, sizeof last_q);
    have_q = 1;
  }
  int nan = 0, pinf = 0, ninf = 0;
  mpz_t n, t;
  mpz_init(n);
  mpz_init(t);
  for (int g = 0; g < 4; g++) {
    /* A group's products share its scale: their sum, relative to its
       lowest set bit, goes through a native 128-bit integer when it fits
       (it does for real-looking rows), else term by term through GMP. */
    const float s = sc[g];
    unsigned long tm[32];
    long te[32];
    int tneg[32], nt = 0;
    long lo = LONG_MAX, hi = LONG_MIN;
    for (int d = 32 * g; d < 32 * g + 32; d++) {
      const float kv = k[d]; /* the e2m1 value; times s, it may overflow fp32 */
      if (isnan(q[d]) || isnan(s)) {
        nan = 1;
      } else if (isinf(q[d])) {
        if (kv == 0.0f)
          nan = 1;
        else if ((q[d] < 0) != (kv < 0))
          ninf = 1;
        else
          pinf = 1;
      } else if (q[d] != 0.0f && kv != 0.0f) {
        const unsigned h = (unsigned)(fabsf(kv) * 2.0f); /* e2m1 in halves: 1..12 */
        const int z = __builtin_ctz(h);
        const unsigned long m = qm[d] * (h >> z); /* below 2^11 */
        const long e = qe[d] + z - 1;
        tm[nt] = m;
        te[nt] = e;
        tneg[nt++] = (q[d] < 0) != (kv < 0);
        lo = e < lo ? e : lo;
        hi = e + 11 > hi ? e + 11 : hi;
      }
    }
    if (nt == 0 || nan || isnan(s))
      continue;
    long es;
    const unsigned long ms = int_form(s, &es);
    if (hi - lo <= 120) {
      __int128 acc = 0;
      for (int i = 0; i < nt; i++) { /* magnitudes shifted, then signed: below 2^120 */
        const __int128 v = (__int128)((unsigned __int128)tm[i] << (te[i] - lo));
        acc += tneg[i] ? -v : v;
      }
      const int neg = acc < 0;
      const unsigned __int128 a = neg ? (unsigned __int128)(-acc) : (unsigned __int128)acc;
      mpz_set_ui(t, (unsigned long)(a >> 64));
      mpz_mul_2exp(t, t, 64);
      mpz_add_ui(t, t, (unsigned long)a);
      mpz_mul_ui(t, t, ms);
      mpz_mul_2exp(t, t, (mp_bitcnt_t)(lo + es + BASE));
      if (neg)
        mpz_sub(n, n, t);
      else
        mpz_add(n, n, t);
    } else {
      for (int i = 0; i < nt; i++) {
        mpz_set_ui(t, tm[i]);
        mpz_mul_ui(t, t, ms);
        mpz_mul_2exp(t, t, (mp_bitcnt_t)(te[i] + es + BASE));
        if (tneg[i])
          mpz_sub(n, n, t);
        else
          mpz_add(n, n, t);
      }
    }
  }
  float logit;
  if (nan || (pinf && ninf)) {
    logit = NAN;
  } else if (pinf || ninf) {
    logit = c->scale * (pinf ? INFINITY : -INFINITY);
  } else if (mpz_sgn(n) == 0 || c->scale == 0.0f) {
    logit = 0.0f;
  } else {
    long es;
    unsigned long ms = int_form(c->scale, &es);
    int neg = (mpz_sgn(n) < 0) != (c->scale < 0);
    mpz_abs(n, n);
    mpz_mul_ui(n, n, ms);
    long e = es - BASE; /* |scale * D| = n * 2^e */
    long bits = (long)mpz_sizeinbase(n, 2);
    long shift = bits - 24 > -149 - e ? bits - 24 : -149 - e;
    if (shift > 0) {
      mpz_t half;
      mpz_init(half);
      mpz_fdiv_r_2exp(t, n, (mp_bitcnt_t)shift);
      mpz_fdiv_q_2exp(n, n, (mp_bitcnt_t)shift);
      mpz_set_ui(half, 1);
      mpz_mul_2exp(half, half, (mp_bitcnt_t)(shift - 1));
      int cmp = mpz_cmp(t, half);
      if (cmp > 0 || (cmp == 0 && mpz_odd_p(n)))
        mpz_add_ui(n, n, 1);
      mpz_clear(half);
      e += shift;
    }
    double m = (double)mpz_get_ui(n); /* at most 2^24 */
    if (m == 0.0)
      logit = 0.0f;
    else if (m * ldexp(1.0, (int)e) >= 0x1p128)
      logit = neg ? -INFINITY : INFINITY;
    else
      logit = (float)(neg ? -ldexp(m, (int)e) : ldexp(m, (int)e));
  }
  mpz_clear(n);
  mpz_clear(t);
  return logit;
}

float oracle_logit(const struct oracle_call *c, int h, int row, int r, int p) {
  float q[128], k[128], sc[4];
  for (int d = 0; d < 128; d++)
    q[d] = query_elem(c, row, h, d);
  decode_token(c, r, p, k, sc);
  return logit_of(c, q, k, sc);
}

static float clamp(float x) {
  const float cap = nextafterf(1e29f, 0.0f);
  return x > cap ? cap : x;
}

void oracle_scores(const struct oracle_call *c, float *scores, int64_t stride) {
  for (int r = 0; r < c->num_reqs; r++) {
    /* This request's rows, and its keys decoded once. */
    int first = 0, count = 0;
    if (c->mode == 1) {
      first = r * c->query_len;
      count = c->query_len;
    } else {
      first = c->cu_seqlens_q[r];
      count = c->cu_seqlens_q[r + 1] - first;
    }
    if (count == 0)
      continue;
    int tokens = c->seq_lens[r];
    float *keys = malloc(sizeof(float) * 132 * (size_t)tokens);
    for (int p = 0; p < tokens; p++)
      decode_token(c, r, p, keys + 132 * (size_t)p, keys + 132 * (size_t)p + 128);
    for (int h = 0; h < c->num_heads; h++)
      for (int row = first; row < first + count; row++) {
        float q[128];
        for (int d = 0; d < 128; d++)
          q[d] = query_elem(c, row, h, d);
        int pos = oracle_row_pos(c, row);
        for (int b = 0; b * 128 <= pos; b++) {
          float best = NAN;
          for (int p = b * 128; p <= pos && p < b * 128 + 128; p++) {
            const float *k = keys + 132 * (size_t)p;
            float l = logit_of(c, q, k, k + 128);
            if (isnan(l))
              continue;
            if (isnan(best) || l > best)
              best = l;
          }
          scores[((int64_t)h * c->num_rows + row) * stride + b] = clamp(best);
        }
      }
    free(keys);
  }
}

void oracle_pin(const struct oracle_call *c, float *scores, int64_t stride) {
  for (int h = 0; h < c->num_heads; h++)
    for (int row = 0; row < c->num_rows; row++) {
      float *s = scores + ((int64_t)h * c->num_rows + row) * stride;
      int n = oracle_row_blocks(c, row);
      for (int b = 0; b < n; b++)
        s[b] = clamp(s[b]);
      for (int b = 0; b < n && b < c->init_blocks; b++)
        s[b] = 1e30f;
      for (int b = n - c->local_blocks < 0 ? 0 : n - c->local_blocks; b < n; b++)
        s[b] = 1e29f;
    }
}

struct ranked {
  float score;
  int id;
};

static int by_rank(const void *pa, const void *pb) {
  const struct ranked *a = pa, *b = pb;
  int an = isnan(a->score), bn = isnan(b->score);
  if (an != bn)
    return an ? 1 : -1;
  if (!an && a->score != b->score)
    return a->score > b->score ? -1 : 1;
  return a->id < b->id ? -1 : a->id > b->id;
}

void oracle_topk(const struct oracle_call *c, const float *scores,
                 int64_t stride, int32_t *topk) {
  struct ranked *all = malloc(sizeof *all * (size_t)oracle_width(c));
  for (int h = 0; h < c->num_heads; h++)
    for (int row = 0; row < c->num_rows; row++) {
      const float *s = scores + ((int64_t)h * c->num_rows + row) * stride;
      int32_t *out = topk + ((int64_t)h * c->num_rows + row) * 16;
      int n = oracle_row_blocks(c, row);
      for (int b = 0; b < n; b++)
        all[b] = (struct ranked){s[b], b};
      qsort(all, (size_t)n, sizeof *all, by_rank);
      for (int i = 0; i < 16; i++)
        out[i] = i < n ? all[i].id : -1;
    }
  free(all);
}
