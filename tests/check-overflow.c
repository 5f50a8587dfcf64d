/*
 * check-overflow.c - offsets are 64-bit: a score buffer whose rows lie
 * more than 2^31 floats apart (16 GiB of address space, reserved sparsely
 * with MAP_NORESERVE: only the pages written are ever backed) gives the
 * scores and top-k of a compact buffer.  Skips (77) where the system will
 * not reserve that much address space.
 *
 * SPDX-License-Identifier: MIT
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cases.h"
#include "suite-main.h"

#define STRIDE ((int64_t)1 << 29) /* floats between rows: 2 GiB */

static float *huge;
static size_t huge_bytes;

START_TEST(stride_past_two_to_the_31) {
  static const int32_t lens[] = {3000, 129, 700, 2049};
  struct test_case *tc = case_decode(15000u, FLAVOR_PLAIN, 2, 1, M3IDX_DTYPE_BF16, 4, lens);
  case_set_forced(tc, 1, 2);
  m3idx_options o;
  m3idx_context *ctx;
  case_options(tc, &o);
  o.backend = M3IDX_BACKEND_CPU; /* host memory: the HIP backend would stage 16 GiB */
  ck_assert_int_eq(m3idx_context_create(&o, &ctx), M3IDX_OK);
  const m3idx_batch *b = &tc->batch;
  int64_t width = (b->max_seq_len + 127) / 128, rows = (int64_t)b->num_heads * b->num_rows;
  ck_assert((rows - 1) * STRIDE > INT32_MAX); /* the last row is past 2^31 floats */
  float *compact = calloc((size_t)(rows * width), sizeof(float));
  int32_t topk_c[8 * 16], topk_h[8 * 16];
  ck_assert_int_eq(m3idx_index_topk_decode(ctx, b, &tc->query, &tc->kcache, 1, 2, NULL, 0,
                                           topk_c, compact, width), M3IDX_OK);
  ck_assert_int_eq(m3idx_index_topk_decode(ctx, b, &tc->query, &tc->kcache, 1, 2, NULL, 0,
                                           topk_h, huge, STRIDE), M3IDX_OK);
  ck_assert_int_eq(memcmp(topk_c, topk_h, sizeof(int32_t) * (size_t)rows * 16), 0);
  for (int64_t r = 0; r < rows; r++) {
    int n = oracle_row_blocks(&tc->oc, (int)(r % b->num_rows));
    ck_assert_msg(memcmp(compact + r * width, huge + r * STRIDE, sizeof(float) * (size_t)n) == 0,
                  "row %lld differs", (long long)r);
  }
  /* The stages alone, on the huge layout. */
  ck_assert_int_eq(m3idx_score_decode(ctx, b, &tc->query, &tc->kcache, NULL, 0, huge, STRIDE),
                   M3IDX_OK);
  ck_assert_int_eq(m3idx_pin_forced_blocks(ctx, b, 1, 2, huge, STRIDE), M3IDX_OK);
  ck_assert_int_eq(m3idx_topk_from_scores(ctx, b, huge, STRIDE, topk_h), M3IDX_OK);
  ck_assert_int_eq(memcmp(topk_c, topk_h, sizeof(int32_t) * (size_t)rows * 16), 0);
  free(compact);
  m3idx_context_destroy(ctx);
  case_free(tc);
}
END_TEST

int main(void) {
  huge_bytes = (size_t)8 * (size_t)STRIDE * sizeof(float);
  void *p = mmap(NULL, huge_bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    printf("SKIP: cannot reserve %zu bytes of address space for the sparse score buffer\n",
           huge_bytes);
    return 77;
  }
  huge = p;
  Suite *s = suite_create("overflow");
  TCase *t = tcase_create("64-bit offsets");
  tcase_set_timeout(t, 300);
  tcase_add_test(t, stride_past_two_to_the_31);
  suite_add_tcase(s, t);
  int rc = run_suite(s);
  munmap(p, huge_bytes);
  return rc;
}
