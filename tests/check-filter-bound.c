/*
 * check-filter-bound.c - the tensor-core filter's proof (lib/filter-cut.h)
 * on the CPU, where CI runs it.  A key's A is formed here as the
 * matrix-core kernels form it: the row cut at M3IDX_GEMM_CUT_BITS, each
 * group's exact integer sum read as a float through the magic bits, and
 * m3idx__gemm_key_factors' start plus one fused multiply-add a group.
 * The key's exact D / U is a GMP rational of the elements' values (z =
 * q * 2^(12 - Hq), each product with the code exact in a double), and
 * must lie in [A, A + width]; on a page, the key of the largest D must
 * pass the kernels' test fl(A + width) >= the largest A.  Rows and keys
 * are random (scale bytes near the page's largest, far below it, past
 * fp32's normals, NaN), and built so that the cut errs by nearly its
 * bound: every element just short of an integer after the cut, every
 * code +-6 against it.
 *
 * SPDX-License-Identifier: MIT
 */
#include <check.h>
#include <gmp.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cases.h"
#include "filter-cut.h"
#include "suite-main.h"

static uint64_t rng;
static uint64_t next(void) { return case_rand(&rng); }

/* A key in halves: 2 * its e2m1 values (-12 .. 12), and its four scale
 * bytes. */
struct key {
  int8_t halves[128];
  uint8_t e[4];
};

/* The e2m1 magnitudes in halves, from SPEC section 2's table. */
static const int8_t mag_halves[8] = {0, 1, 2, 3, 4, 6, 8, 12};

/* What the kernels hold of a row: its cut exponent and integers Q. */
struct cut_row {
  float q[128];
  int32_t hq, Q[128];
};

static void cut(struct cut_row *r) {
  uint32_t top = 0u;
  for (int d = 0; d < 128; d++) {
    const uint32_t u = m3idx__float_to_bits(r->q[d]) & 0x7fffffffu;
    top = u > top ? u : top;
  }
  r->hq = m3idx__cut_exponent(top);
  for (int d = 0; d < 128; d++)
    r->Q[d] = m3idx__cut_q_at(r->q[d], r->hq, M3IDX_GEMM_CUT_BITS, 0);
}

/* A of the key as the kernels form it, and its width; 0 for a NaN scale
 * (whose A must be -inf). */
static int filter_a(const struct cut_row *r, const struct key *k, int32_t emax, float sign,
                    float *a, float *width) {
  const uint32_t sc = (uint32_t)k->e[0] | (uint32_t)k->e[1] << 8 | (uint32_t)k->e[2] << 16 |
                      (uint32_t)k->e[3] << 24;
  float f[4], start;
  m3idx__gemm_key_factors(sc, emax, sign, f, &start, width);
  if (m3idx__nan_scale_bytes(sc) != 0u) {
    ck_assert(start == -INFINITY);
    return 0;
  }
  *a = start;
  for (int g = 0; g < 4; g++) {
    int64_t s = 0; /* the group's exact sum (the MMA's, less the codes' bias) */
    for (int d = 32 * g; d < 32 * g + 32; d++)
      s += (int64_t)k->halves[d] * r->Q[d];
    ck_assert_msg(s > -(1 << 22) && s < (1 << 22), "group %d sum %lld", g, (long long)s);
    const float t = m3idx__bits_to_float((uint32_t)(M3IDX_GEMM_MAGIC_BITS + (int32_t)s));
    ck_assert((double)t == (double)M3IDX_GEMM_MAGIC + (double)s);
    *a = fmaf(t, f[g], *a);
  }
  return 1;
}

/* sign * D / U of the key, exactly: sum of z * halves * 2^(e_g - emax). */
static void exact_du(mpq_t out, const struct cut_row *r, const struct key *k, int32_t emax,
                     float sign) {
  mpq_t term;
  mpq_init(term);
  mpq_set_ui(out, 0, 1);
  for (int d = 0; d < 128; d++) {
    const double z = ldexp((double)r->q[d], M3IDX_GEMM_CUT_BITS - r->hq);
    mpq_set_d(term, z * k->halves[d] * ldexp(1.0, k->e[d / 32] - emax) * sign);
    mpq_add(out, out, term);
  }
  mpq_clear(term);
}

static int checked; /* intervals checked, so that a suite that checks none fails */

/* A <= sign * D / U <= A + width, exactly. */
static void assert_in_interval(const struct cut_row *r, const struct key *k, int32_t emax,
                               float sign) {
  float a, width;
  if (!filter_a(r, k, emax, sign, &a, &width))
    return;
  mpq_t x, lo, hi;
  mpq_inits(x, lo, hi, NULL);
  exact_du(x, r, k, emax, sign);
  mpq_set_d(lo, a);
  mpq_set_d(hi, width);
  mpq_add(hi, hi, lo);
  ck_assert_msg(mpq_cmp(lo, x) <= 0 && mpq_cmp(x, hi) <= 0,
                "D/U %.9g outside [%.9g, %.9g + %.9g] (hq %d, emax %d, sign %g)",
                mpq_get_d(x), (double)a, (double)a, (double)width, r->hq, emax, (double)sign);
  mpq_clears(x, lo, hi, NULL);
  checked++;
}

/* A random element: a bf16 value of exponent -span .. 0, or 0. */
static float random_element(int span) {
  const uint64_t x = next();
  if (x % 16 == 0)
    return 0.0f;
  const float m = 1.0f + (float)((x >> 8) & 127u) / 128.0f;
  return ldexpf((x & 1u) ? -m : m, -(int)((x >> 16) % (uint64_t)(span + 1)));
}

static void random_key(struct key *k, int32_t emax, int kind) {
  for (int d = 0; d < 128; d++) {
    const unsigned code = (unsigned)(next() & 15u);
    k->halves[d] = (int8_t)((code & 8u) ? -mag_halves[code & 7u] : mag_halves[code & 7u]);
  }
  for (int g = 0; g < 4; g++) {
    const uint64_t x = next();
    int32_t e = emax - (int32_t)(x % 4); /* near the page's largest, as model pages are */
    if (kind == 1)
      e = emax - (int32_t)(x % 60);
    if (kind == 2) /* past fp32's normals: the factor is taken as 2^-126 */
      e = (int32_t)(x % 3) == 0 ? emax : emax - 120 - (int32_t)(x % 40);
    if (kind == 3 && x % 7 == 0)
      e = 255; /* NaN */
    k->e[g] = (uint8_t)(e < 0 ? 0 : e);
  }
}

/* Random rows and keys: every key's interval holds its exact D / U. */
START_TEST(random_keys_in_their_intervals) {
  rng = 8100u + (uint64_t)_i;
  struct cut_row r;
  struct key k;
  const int spans[] = {0, 6, 20, 60};
  checked = 0;
  for (int row = 0; row < 40; row++) {
    for (int d = 0; d < 128; d++)
      r.q[d] = random_element(spans[row % 4]);
    if (row % 10 == 9) /* one element, the rest zero */
      for (int d = 1; d < 128; d++)
        r.q[d] = 0.0f;
    cut(&r);
    for (int i = 0; i < 64; i++) {
      const int32_t emax = 127 + (int32_t)(next() % 120) - 60;
      random_key(&k, emax, _i);
      k.e[next() % 4] = (uint8_t)emax; /* emax is the page's largest byte */
      assert_in_interval(&r, &k, emax, i % 2 ? -1.0f : 1.0f);
    }
  }
  ck_assert_int_ge(checked, _i == 3 ? 1000 : 2560);
}
END_TEST

/* The cut's worst: the row's largest element 1.0 (Hq 0), the others
 * -(1 + 127/128) 2^-12 (z just above -2: Q = -1, residual -0.99) or
 * +(1 + 127/128) 2^-12, and every other code -6 or +6 against the
 * residual's sign, all scale bytes emax: the filter's A is 127 * 11.9 =
 * 1512 from D / U, of e_k = 1560. */
START_TEST(worst_cut_in_its_interval) {
  struct cut_row r;
  struct key k;
  const float small = ldexpf(1.0f + 127.0f / 128.0f, -12);
  for (int v = 0; v < 8; v++) {
    const float sign = v & 1 ? -1.0f : 1.0f;
    r.q[0] = 1.0f;
    for (int d = 1; d < 128; d++)
      r.q[d] = (v & 2) && d % 2 ? small : -small;
    cut(&r);
    ck_assert_int_eq(r.hq, 0);
    for (int d = 1; d < 128; d++)
      ck_assert_int_eq(r.Q[d], r.q[d] < 0.0f ? -1 : 1);
    /* The code against the residual (z - Q) and the sign: its product
       with the residual is +-11.9 the way v asks. */
    const int against = v & 4 ? 1 : -1;
    k.halves[0] = (int8_t)(v & 4 ? 12 : -12);
    for (int d = 1; d < 128; d++)
      k.halves[d] = (int8_t)(12 * against * (r.q[d] < 0.0f ? -1 : 1) * (int)sign);
    memset(k.e, 127, sizeof k.e);
    float a, width;
    ck_assert(filter_a(&r, &k, 127, sign, &a, &width));
    mpq_t x, lo;
    mpq_inits(x, lo, NULL);
    exact_du(x, &r, &k, 127, sign);
    mpq_set_d(lo, a);
    mpq_sub(x, x, lo); /* where D / U lies in the interval */
    const double at = mpq_get_d(x);
    mpq_clears(x, lo, NULL);
    /* The residuals all push one way: D / U lies 1512 from one end. */
    ck_assert_msg(against > 0 ? at > 0.5 * width + 1400.0 : at < 0.5 * width - 1400.0,
                  "v %d: D / U at %.3f of width %.3f", v, at, (double)width);
    checked = 0;
    assert_in_interval(&r, &k, 127, sign);
    ck_assert_int_eq(checked, 1);
  }
}
END_TEST

/* A page of 128 keys against a row: the key of the largest D passes the
 * kernels' test, L + width >= the largest L, in fp32. */
START_TEST(page_winner_passes) {
  rng = 8200u + (uint64_t)_i;
  static struct key page[128];
  struct cut_row r;
  const float small = ldexpf(1.0f + 127.0f / 128.0f, -12);
  for (int trial = 0; trial < 12; trial++) {
    for (int d = 0; d < 128; d++)
      r.q[d] = trial % 2 ? random_element(12) : (d == 0 ? 1.0f : (next() & 1) ? small : -small);
    cut(&r);
    const int32_t emax = 127;
    for (int t = 0; t < 128; t++) {
      random_key(&page[t], emax, _i);
      if (trial % 2 == 0) /* codes +-6 only, so the residuals' pushes are large */
        for (int d = 0; d < 128; d++)
          page[t].halves[d] = (int8_t)((next() & 1) ? 12 : -12);
    }
    page[0].e[0] = (uint8_t)emax;
    const float sign = trial % 3 ? 1.0f : -1.0f;
    float a[128], w[128], top = -INFINITY;
    int best = -1;
    mpq_t x[128];
    for (int t = 0; t < 128; t++) {
      mpq_init(x[t]);
      if (!filter_a(&r, &page[t], emax, sign, &a[t], &w[t]))
        continue;
      exact_du(x[t], &r, &page[t], emax, sign);
      top = a[t] > top ? a[t] : top;
      if (best < 0 || mpq_cmp(x[t], x[best]) > 0)
        best = t;
    }
    ck_assert_int_ge(best, 0);
    ck_assert_msg(a[best] + w[best] >= top, "trial %d: the largest D's key %d fails the floor",
                  trial, best);
    for (int t = 0; t < 128; t++)
      mpq_clear(x[t]);
  }
}
END_TEST

/* The near tie of tests/patterns.c's filter_bound v 8: the row is 1.0,
 * 63 elements of -(1 + 127/128) 2^-12 and 64 of +(1 + 127/128) 2^-12;
 * key X holds 1.0 and then 6.0 in the 63 and -6.0 in the 64, key Y 0.5
 * and then -6.0 in the first 45 of the 63.  X's A is 2032 above Y's, Y's
 * D / U 15.9 above X's: Y must pass against X's A, which a width of e_k
 * would not give.  _i 1: scale -1 and the codes negated, the same order. */
START_TEST(near_tie_winner_passes) {
  struct cut_row r;
  struct key k[2]; /* X, Y */
  const float small = ldexpf(1.0f + 127.0f / 128.0f, -12);
  const int sign = _i ? -1 : 1;
  r.q[0] = 1.0f;
  for (int d = 1; d < 128; d++)
    r.q[d] = d < 64 ? -small : small;
  cut(&r);
  for (int d = 0; d < 128; d++) {
    k[0].halves[d] = (int8_t)(sign * (d == 0 ? 2 : d < 64 ? 12 : -12));
    k[1].halves[d] = (int8_t)(sign * (d == 0 ? 1 : d <= 45 ? -12 : 0));
  }
  float a[2], w[2];
  mpq_t x[2];
  for (int i = 0; i < 2; i++) {
    memset(k[i].e, 127, sizeof k[i].e);
    ck_assert(filter_a(&r, &k[i], 127, (float)sign, &a[i], &w[i]));
    mpq_init(x[i]);
    exact_du(x[i], &r, &k[i], 127, (float)sign);
  }
  ck_assert(mpq_cmp(x[1], x[0]) > 0); /* Y holds the larger D */
  ck_assert(a[0] - a[1] > 2000.0f);   /* and X the far larger A */
  mpq_clears(x[0], x[1], NULL);
  ck_assert_msg(a[1] + w[1] >= a[0], "Y's A %.3f + width %.3f is below X's %.3f", (double)a[1],
                (double)w[1], (double)a[0]);
}
END_TEST

int main(void) {
  Suite *s = suite_create("filter-bound");
  TCase *tc = tcase_create("tensor-core filter");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, random_keys_in_their_intervals, 0, 4);
  tcase_add_test(tc, worst_cut_in_its_interval);
  tcase_add_loop_test(tc, page_winner_passes, 0, 3);
  tcase_add_loop_test(tc, near_tie_winner_passes, 0, 2);
  suite_add_tcase(s, tc);
  return run_suite(s);
}
