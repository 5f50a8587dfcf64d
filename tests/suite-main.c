/*
 * suite-main.c - see suite-main.h.
 *
 * SPDX-License-Identifier: MIT
 */
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "m3idx.h"
#include "suite-main.h"

int suite_wants_hip(void) {
  const char *b = getenv("M3IDX_BACKEND");
  return b != NULL && strcasecmp(b, "hip") == 0;
}

int run_suite(Suite *s) {
  SRunner *sr = srunner_create(s);
  if (suite_wants_hip()) {
    const char *why = m3idx_backend_unavailable_reason(M3IDX_BACKEND_HIP);
    if (why != NULL) {
      printf("SKIP: M3IDX_BACKEND=hip, but the HIP backend is unavailable: %s\n", why);
      srunner_free(sr);
      return 77;
    }
    srunner_set_fork_status(sr, CK_NOFORK);
  }
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
