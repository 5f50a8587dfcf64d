/*
 * check-api.c - version macros against the linked library, options and
 * context creation, backend and configuration reasons, status sentences.
 *
 * SPDX-License-Identifier: MIT
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "m3idx.h"
#include "suite-main.h"

START_TEST(version_agrees) {
  char buf[32];
  snprintf(buf, sizeof buf, "%d.%d.%d", M3IDX_VERSION_MAJOR, M3IDX_VERSION_MINOR,
           M3IDX_VERSION_PATCH);
  ck_assert_str_eq(m3idx_version(), M3IDX_VERSION_STRING);
  ck_assert_str_eq(m3idx_version(), buf);
  ck_assert_int_eq(m3idx_version_number(), M3IDX_VERSION_NUMBER);
  ck_assert_int_eq(M3IDX_VERSION_NUMBER,
                   M3IDX_VERSION_MAJOR * 10000 + M3IDX_VERSION_MINOR * 100 + M3IDX_VERSION_PATCH);
#ifdef PACKAGE_VERSION_FROM_CONFIGURE
  ck_assert_str_eq(m3idx_version(), PACKAGE_VERSION_FROM_CONFIGURE);
#endif
}
END_TEST

START_TEST(constants) {
  ck_assert_int_eq(M3IDX_PAGE_BYTES, M3IDX_BLOCK_SIZE * (M3IDX_HEAD_DIM / 2 + M3IDX_HEAD_DIM / M3IDX_MX_GROUP));
  uint32_t u;
  float f = M3IDX_SENTINEL_INIT;
  memcpy(&u, &f, 4);
  ck_assert_uint_eq(u, 0x7149f2cau);
  f = M3IDX_SENTINEL_LOCAL;
  memcpy(&u, &f, 4);
  ck_assert_uint_eq(u, 0x6fa18f08u);
  ck_assert_uint_eq(M3IDX_SCORE_CLAMP_BITS + 1, 0x6fa18f08u);
}
END_TEST

START_TEST(status_sentences) {
  const char *seen[16] = {0};
  for (int s = 0; s >= -15; s--) {
    const char *m = m3idx_strerror((m3idx_status)s);
    ck_assert_ptr_nonnull(m);
    ck_assert_str_ne(m, "unknown m3idx status");
    for (int t = 0; t < -s; t++)
      ck_assert_str_ne(m, seen[t]);
    seen[-s] = m;
  }
  ck_assert_str_eq(m3idx_strerror((m3idx_status)-99), "unknown m3idx status");
}
END_TEST

START_TEST(config_reasons) {
  ck_assert_ptr_null(m3idx_config_unsupported_reason(16, 128, 128, "max"));
  ck_assert_ptr_nonnull(strstr(m3idx_config_unsupported_reason(8, 128, 128, "max"), "top-k"));
  ck_assert_ptr_nonnull(strstr(m3idx_config_unsupported_reason(16, 64, 128, "max"), "block size"));
  ck_assert_ptr_nonnull(strstr(m3idx_config_unsupported_reason(16, 128, 64, "max"), "head dim"));
  ck_assert_ptr_nonnull(strstr(m3idx_config_unsupported_reason(16, 128, 128, "sum"), "score type"));
  ck_assert_ptr_nonnull(m3idx_config_unsupported_reason(16, 128, 128, NULL));
}
END_TEST

START_TEST(backend_reasons) {
  ck_assert_ptr_null(m3idx_backend_unavailable_reason(M3IDX_BACKEND_CPU));
  ck_assert_ptr_null(m3idx_backend_unavailable_reason(M3IDX_BACKEND_AUTO));
  ck_assert_ptr_nonnull(m3idx_backend_unavailable_reason((m3idx_backend)9));
  const char *why = m3idx_backend_unavailable_reason(M3IDX_BACKEND_HIP);
  m3idx_options o;
  m3idx_context *ctx = (m3idx_context *)&o;
  m3idx_options_init(&o);
  o.backend = M3IDX_BACKEND_HIP;
  m3idx_status st = m3idx_context_create(&o, &ctx);
  if (why != NULL) {
    ck_assert_int_eq(st, M3IDX_ERR_BACKEND_UNAVAILABLE);
    ck_assert_ptr_null(ctx);
    ck_assert_ptr_nonnull(strstr(m3idx_last_error(NULL), why));
  } else {
    ck_assert_int_eq(st, M3IDX_OK);
    ck_assert_int_eq(m3idx_context_backend(ctx), M3IDX_BACKEND_HIP);
    m3idx_context_destroy(ctx);
  }
}
END_TEST

START_TEST(options_checked) {
  m3idx_options o;
  m3idx_context *ctx = NULL;
  ck_assert_int_eq(m3idx_context_create(NULL, &ctx), M3IDX_ERR_NULL_POINTER);
  m3idx_options_init(&o);
  ck_assert_int_eq(m3idx_context_create(&o, NULL), M3IDX_ERR_NULL_POINTER);
  o.size = 8;
  ck_assert_int_eq(m3idx_context_create(&o, &ctx), M3IDX_ERR_OPTIONS);
  ck_assert_ptr_nonnull(strstr(m3idx_last_error(NULL), "m3idx_options_init"));
  m3idx_options_init(&o);
  o.backend = (m3idx_backend)5;
  ck_assert_int_eq(m3idx_context_create(&o, &ctx), M3IDX_ERR_INVALID_ARGUMENT);
  m3idx_options_init(&o);
  o.threads = -1;
  ck_assert_int_eq(m3idx_context_create(&o, &ctx), M3IDX_ERR_INVALID_SIZE);
  m3idx_options_init(&o);
  o.max_rows = 0;
  ck_assert_int_eq(m3idx_context_create(&o, &ctx), M3IDX_ERR_INVALID_SIZE);
  ck_assert_ptr_nonnull(strstr(m3idx_last_error(NULL), "max_rows"));
  m3idx_options_init(&o);
  o.flags = 0x80;
  ck_assert_int_eq(m3idx_context_create(&o, &ctx), M3IDX_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(ctx);
  /* Only the sizes of released structs are taken: a larger one (a newer
   * header) or a garbage size is refused, and nothing past the struct is
   * read (1 << 40 walked far past it and crashed before). */
  struct {
    m3idx_options o;
    uint64_t future;
  } big;
  memset(&big, 0, sizeof big);
  m3idx_options_init(&big.o);
  big.o.size = sizeof big;
  ck_assert_int_eq(m3idx_context_create(&big.o, &ctx), M3IDX_ERR_OPTIONS);
  ck_assert_ptr_nonnull(strstr(m3idx_last_error(NULL), "opts->size"));
  m3idx_options *heap = malloc(sizeof *heap);
  ck_assert_ptr_nonnull(heap);
  m3idx_options_init(heap);
  heap->size = (size_t)1 << 40;
  ck_assert_int_eq(m3idx_context_create(heap, &ctx), M3IDX_ERR_OPTIONS);
  heap->size = sizeof *heap + 1;
  ck_assert_int_eq(m3idx_context_create(heap, &ctx), M3IDX_ERR_OPTIONS);
  ck_assert_ptr_null(ctx);
  heap->size = sizeof *heap;
  heap->backend = M3IDX_BACKEND_CPU;
  ck_assert_int_eq(m3idx_context_create(heap, &ctx), M3IDX_OK);
  ck_assert_int_eq(m3idx_context_backend(ctx), M3IDX_BACKEND_CPU);
  ck_assert_str_eq(m3idx_last_error(ctx), "");
  ck_assert_int_eq(m3idx_synchronize(ctx), M3IDX_OK);
  m3idx_context_destroy(ctx);
  free(heap);
  m3idx_context_destroy(NULL); /* harmless */
}
END_TEST

START_TEST(backend_environment) {
  m3idx_options o;
  m3idx_context *ctx = NULL;
  m3idx_options_init(&o);
  setenv("M3IDX_BACKEND", "cpu", 1);
  ck_assert_int_eq(m3idx_context_create(&o, &ctx), M3IDX_OK);
  ck_assert_int_eq(m3idx_context_backend(ctx), M3IDX_BACKEND_CPU);
  m3idx_context_destroy(ctx);
  setenv("M3IDX_BACKEND", "gpu", 1);
  ck_assert_int_eq(m3idx_context_create(&o, &ctx), M3IDX_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(m3idx_last_error(NULL), "M3IDX_BACKEND"));
  /* An explicit backend is not overridden. */
  o.backend = M3IDX_BACKEND_CPU;
  ck_assert_int_eq(m3idx_context_create(&o, &ctx), M3IDX_OK);
  m3idx_context_destroy(ctx);
  unsetenv("M3IDX_BACKEND");
}
END_TEST

START_TEST(limits_too_large) {
  m3idx_options o;
  m3idx_context *ctx = NULL;
  m3idx_options_init(&o);
  o.backend = M3IDX_BACKEND_CPU;
  o.max_reqs = 1 << 30;
  o.max_model_len = 1 << 30;
  ck_assert_int_eq(m3idx_context_create(&o, &ctx), M3IDX_ERR_LIMIT);
  ck_assert_ptr_null(ctx);
  ck_assert_ptr_nonnull(strstr(m3idx_last_error(NULL), "max_reqs"));
}
END_TEST

int main(void) {
  Suite *s = suite_create("api");
  TCase *t = tcase_create("api");
  tcase_add_test(t, version_agrees);
  tcase_add_test(t, constants);
  tcase_add_test(t, status_sentences);
  tcase_add_test(t, config_reasons);
  tcase_add_test(t, backend_reasons);
  tcase_add_test(t, options_checked);
  tcase_add_test(t, backend_environment);
  tcase_add_test(t, limits_too_large);
  suite_add_tcase(s, t);
  return run_suite(s);
}
