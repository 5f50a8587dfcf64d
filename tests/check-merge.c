/*
 * check-merge.c - m3idx_merge_topk against an independent oracle: rows of
 * block scores (random, tie-heavy, -0 and +0, NaN, pinned sentinels,
 * -inf) split into parts (contiguous ranges and scattered blocks, parts
 * with fewer than 16 blocks or none); each part's top-16 and the whole
 * row's are taken here by a plain sort, and the merge of the parts' lists
 * must give the whole row's ids and scores, bit for bit.  Bad arguments
 * are refused by name with the outputs untouched.
 *
 * SPDX-License-Identifier: MIT
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "m3idx.h"
#include "suite-main.h"

#define MAXN 600
#define MAXP 40

static uint64_t rng;
static uint64_t next(void) { /* splitmix64 */
  uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* The oracle's order, written from SPEC section 7's words: a number
 * before NaN, the larger score first (-0 equal to +0), then the smaller
 * block id. */
static const float *order_scores;
static int before(const void *a, const void *b) {
  const int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
  const float x = order_scores[i], y = order_scores[j];
  const int xn = isnan(x), yn = isnan(y);
  if (xn != yn)
    return xn ? 1 : -1;
  if (!xn && x != y)
    return x > y ? -1 : 1;
  return i < j ? -1 : i > j;
}

/* The top-16 of the blocks in `set' (count of them) of scores s: ids and
 * their scores, -1 and -inf after the last. */
static void oracle_top(const float *s, const int32_t *set, int count, int32_t *ids, float *vals) {
  int32_t *order = malloc(sizeof(int32_t) * (size_t)(count + 1));
  memcpy(order, set, sizeof(int32_t) * (size_t)count);
  order_scores = s;
  qsort(order, (size_t)count, sizeof *order, before);
  for (int k = 0; k < 16; k++) {
    ids[k] = k < count ? order[k] : -1;
    vals[k] = k < count ? s[order[k]] : -INFINITY;
  }
  free(order);
}

static float score_of(int flavour) {
  const uint64_t r = next();
  switch (flavour) {
  case 0: return (float)((double)(r >> 11) * 0x1p-53 * 200.0 - 100.0);
  case 1: return (float)(r % 3); /* ties everywhere */
  case 2: return (r & 1) ? 0.0f : -0.0f; /* zeros of both signs */
  case 3: { /* NaN, infinities, sentinels and a few numbers */
    static const float v[] = {NAN, -NAN, INFINITY, -INFINITY, 1e30f, 1e29f, 1.0f, -1.0f};
    return v[r % 8];
  }
  default: return (float)(int)(r % 7) - 3.0f;
  }
}

/* One test case: pairs rows of n blocks each, split into parts. */
static void merge_case(int flavour, int parts, int scattered) {
  enum { PAIRS = 24 };
  static float s[PAIRS][MAXN];
  static int32_t ids[MAXP][PAIRS * 16], want_ids[PAIRS * 16], got_ids[PAIRS * 16];
  static float vals[MAXP][PAIRS * 16], want_vals[PAIRS * 16], got_vals[PAIRS * 16];
  static int32_t set[MAXN], all[MAXN];
  for (int i = 0; i < PAIRS; i++) {
    const int n = i == 0 ? 0 : i == 1 ? 5 : (int)(next() % MAXN);
    int32_t owner[MAXN];
    for (int b = 0; b < n; b++) {
      s[i][b] = score_of(flavour);
      all[b] = b;
      owner[b] = scattered ? (int32_t)(next() % (uint64_t)parts) : (int32_t)((int64_t)b * parts / (n ? n : 1));
    }
    oracle_top(s[i], all, n, want_ids + 16 * i, want_vals + 16 * i);
    for (int p = 0; p < parts; p++) {
      int count = 0;
      for (int b = 0; b < n; b++)
        if (owner[b] == p)
          set[count++] = b;
      oracle_top(s[i], set, count, ids[p] + 16 * i, vals[p] + 16 * i);
    }
  }
  const int32_t *idp[MAXP];
  const float *valp[MAXP];
  for (int p = 0; p < parts; p++)
    idp[p] = ids[p], valp[p] = vals[p];
  ck_assert_int_eq(m3idx_merge_topk(PAIRS, parts, idp, valp, got_ids, got_vals), M3IDX_OK);
  for (int i = 0; i < PAIRS * 16; i++) {
    ck_assert_msg(got_ids[i] == want_ids[i],
                  "flavour %d, %d parts%s: pair %d slot %d: id %d, the whole row's %d", flavour,
                  parts, scattered ? " (scattered)" : "", i / 16, i % 16, got_ids[i], want_ids[i]);
    ck_assert_msg(memcmp(&got_vals[i], &want_vals[i], 4) == 0,
                  "flavour %d: pair %d slot %d: score bits differ", flavour, i / 16, i % 16);
  }
}

START_TEST(merge_is_the_whole_rows_top) {
  static const int parts[] = {1, 2, 3, 7, 40};
  rng = 0x6d65726765ull + (uint64_t)_i;
  for (int k = 0; k < 5; k++)
    for (int scattered = 0; scattered < 2; scattered++)
      merge_case(_i, parts[k], scattered);
}
END_TEST

/* A part's list may also be merged with the merge's own output (a tree). */
START_TEST(merges_compose) {
  enum { N = 300 };
  float s[N];
  int32_t all[N], ids[4][16], want[16], left[16], right[16], top[16];
  float vals[4][16], wv[16], lv[16], rv[16], tv[16];
  rng = 0x74726565ull;
  for (int b = 0; b < N; b++)
    s[b] = score_of(4), all[b] = b;
  oracle_top(s, all, N, want, wv);
  for (int p = 0; p < 4; p++)
    oracle_top(s, all + p * (N / 4), N / 4, ids[p], vals[p]);
  const int32_t *a[2] = {ids[0], ids[1]}, *b[2] = {ids[2], ids[3]}, *c[2] = {left, right};
  const float *av[2] = {vals[0], vals[1]}, *bv[2] = {vals[2], vals[3]}, *cv[2] = {lv, rv};
  ck_assert_int_eq(m3idx_merge_topk(1, 2, a, av, left, lv), M3IDX_OK);
  ck_assert_int_eq(m3idx_merge_topk(1, 2, b, bv, right, rv), M3IDX_OK);
  ck_assert_int_eq(m3idx_merge_topk(1, 2, c, cv, top, tv), M3IDX_OK);
  ck_assert_int_eq(memcmp(top, want, sizeof want), 0);
  ck_assert_int_eq(memcmp(tv, wv, sizeof wv), 0);
}
END_TEST

/* Refused by name, outputs untouched. */
static void refused(int64_t pairs, int32_t parts, const int32_t *const *ids,
                    const float *const *vals, int32_t *out, float *out_vals, m3idx_status want,
                    const char *words) {
  int32_t before_ids[32];
  if (out != NULL)
    memcpy(before_ids, out, sizeof before_ids);
  ck_assert_int_eq(m3idx_merge_topk(pairs, parts, ids, vals, out, out_vals), want);
  ck_assert_msg(strstr(m3idx_last_error(NULL), words) != NULL, "'%s' lacks '%s'",
                m3idx_last_error(NULL), words);
  if (out != NULL)
    ck_assert_int_eq(memcmp(before_ids, out, sizeof before_ids), 0);
}

START_TEST(bad_arguments) {
  int32_t a[32], b[32], out[64];
  float av[32], bv[32], ov[32];
  for (int k = 0; k < 32; k++)
    a[k] = k < 16 ? k : -1, b[k] = k < 16 ? 100 + k : -1, av[k] = bv[k] = 1.0f;
  memset(out, 0x5a, sizeof out);
  const int32_t *ids[2] = {a, b};
  const float *vals[2] = {av, bv};
  refused(-1, 2, ids, vals, out, ov, M3IDX_ERR_INVALID_SIZE, "pairs is -1");
  refused(1, 0, ids, vals, out, ov, M3IDX_ERR_INVALID_SIZE, "parts is 0");
  refused(INT64_MAX, 2, ids, vals, out, ov, M3IDX_ERR_INVALID_SIZE, "cannot be addressed");
  refused(1, 2, NULL, vals, out, ov, M3IDX_ERR_NULL_POINTER, "ids is NULL");
  refused(1, 2, ids, vals, NULL, ov, M3IDX_ERR_NULL_POINTER, "out_ids is NULL");
  const int32_t *one_null[2] = {a, NULL};
  refused(1, 2, one_null, vals, out, ov, M3IDX_ERR_NULL_POINTER, "ids[1] is NULL");
  b[3] = -2;
  refused(1, 2, ids, vals, out, ov, M3IDX_ERR_INVALID_ARGUMENT, "ids[1] pair 0 slot 3 is -2");
  b[3] = 103, b[5] = -1;
  refused(1, 2, ids, vals, out, ov, M3IDX_ERR_INVALID_ARGUMENT, "ids[1] pair 0 slot 6 is 106");
  b[5] = 105, b[7] = 4;
  refused(1, 2, ids, vals, out, ov, M3IDX_ERR_INVALID_ARGUMENT, "lists block 4 twice");
  b[7] = 107;
  refused(1, 2, ids, vals, (int32_t *)(void *)av, ov, M3IDX_ERR_INVALID_ARGUMENT,
          "out_ids (an output) overlaps part 0");
  refused(2, 1, ids, vals, out, (float *)(void *)(out + 16), M3IDX_ERR_INVALID_ARGUMENT,
          "out_ids and out_scores overlap");
  ck_assert_int_eq(m3idx_merge_topk(0, 2, ids, vals, out, ov), M3IDX_OK); /* no pairs */
}
END_TEST

int main(void) {
  Suite *s = suite_create("merge");
  TCase *tc = tcase_create("merge");
  tcase_add_loop_test(tc, merge_is_the_whole_rows_top, 0, 5);
  tcase_add_test(tc, merges_compose);
  tcase_add_test(tc, bad_arguments);
  suite_add_tcase(s, tc);
  return run_suite(s);
}
