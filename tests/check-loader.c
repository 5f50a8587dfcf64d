/*
 * check-loader.c - the plugin loader against a fake m3idx-hip.so
 * (fake-plugin/): a plugin whose tables have a NULL member or another ABI
 * is reported unavailable with the reason, and AUTO contexts then run on
 * the CPU; the developer tools are handed out only when whole.  Each test
 * runs in its own forked process, so each loads the plugin afresh.
 *
 * SPDX-License-Identifier: MIT
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "devtools.h"
#include "m3idx.h"

static void use_fake(const char *mode) {
  const char *dir = getenv("M3IDX_FAKE_PLUGIN_DIR");
  ck_assert_msg(dir != NULL, "M3IDX_FAKE_PLUGIN_DIR is not set (run through make check)");
  setenv("M3IDX_PLUGIN_DIR", dir, 1);
  setenv("M3IDX_FAKE_PLUGIN", mode, 1);
  unsetenv("M3IDX_BACKEND"); /* AUTO means AUTO here */
}

/* The HIP backend's reason contains want; an AUTO context runs on the CPU. */
static void unavailable_with(const char *want) {
  const char *why = m3idx_backend_unavailable_reason(M3IDX_BACKEND_HIP);
  ck_assert_msg(why != NULL && strstr(why, want) != NULL, "reason '%s', want '%s'",
                why ? why : "(null)", want);
  m3idx_options o;
  m3idx_context *ctx = NULL;
  m3idx_options_init(&o);
  ck_assert_int_eq(m3idx_context_create(&o, &ctx), M3IDX_OK);
  ck_assert_int_eq(m3idx_context_backend(ctx), M3IDX_BACKEND_CPU);
  m3idx_context_destroy(ctx);
  const char *dwhy = NULL;
  ck_assert_ptr_null(m3idx__plugin_devtools(&dwhy));
  ck_assert_str_eq(dwhy, why);
}

START_TEST(null_member) {
  use_fake("null-run");
  unavailable_with("has no 'run' in its backend table");
}
END_TEST

START_TEST(other_abi) {
  use_fake("bad-abi");
  char want[96];
  snprintf(want, sizeof want, "does not match this library (backend ABI %d, expected %d)",
           M3IDX_BACKEND_ABI + 100, M3IDX_BACKEND_ABI);
  unavailable_with(want);
}
END_TEST

START_TEST(plugin_says_why) {
  use_fake("fine");
  unavailable_with("fake plugin: no device here");
}
END_TEST

START_TEST(no_plugin_file) {
  setenv("M3IDX_PLUGIN_DIR", "/nonexistent-m3idx-plugin-dir", 1);
  unsetenv("M3IDX_BACKEND");
  unavailable_with("/nonexistent-m3idx-plugin-dir/m3idx-hip.so");
}
END_TEST

START_TEST(devtools_whole) {
  use_fake("usable");
  ck_assert_ptr_null(m3idx_backend_unavailable_reason(M3IDX_BACKEND_HIP));
  const char *why = "unset";
  const struct m3idx_devtools *dt = m3idx__plugin_devtools(&why);
  ck_assert_ptr_nonnull(dt);
  ck_assert_ptr_null(why);
  ck_assert_int_eq(dt->abi, M3IDX_DEVTOOLS_ABI);
}
END_TEST

START_TEST(devtools_missing) {
  use_fake("no-devtools");
  ck_assert_ptr_null(m3idx_backend_unavailable_reason(M3IDX_BACKEND_HIP));
  const char *why = NULL;
  ck_assert_ptr_null(m3idx__plugin_devtools(&why));
  ck_assert_msg(why && strstr(why, "has no developer tools"), "%s", why ? why : "(null)");
}
END_TEST

START_TEST(devtools_null_member) {
  use_fake("null-devtools-member");
  const char *why = NULL;
  ck_assert_ptr_null(m3idx__plugin_devtools(&why));
  ck_assert_msg(why && strstr(why, "has no 'fill' among its developer tools"), "%s",
                why ? why : "(null)");
}
END_TEST

int main(void) {
  Suite *s = suite_create("loader");
  TCase *t = tcase_create("fake plugin");
  tcase_add_test(t, null_member);
  tcase_add_test(t, other_abi);
  tcase_add_test(t, plugin_says_why);
  tcase_add_test(t, no_plugin_file);
  tcase_add_test(t, devtools_whole);
  tcase_add_test(t, devtools_missing);
  tcase_add_test(t, devtools_null_member);
  suite_add_tcase(s, t);
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_FORK); /* the plugin is loaded once a process */
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
