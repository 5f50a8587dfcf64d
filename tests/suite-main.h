/*
 * suite-main.h - how every Check program runs: on the backend that
 * M3IDX_BACKEND picks; when that is the GPU, without forking (HIP breaks in
 * a child forked after it was initialised), and skipped (exit 77) with the
 * reason when there is no usable GPU.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_TEST_SUITE_MAIN_H
#define M3IDX_TEST_SUITE_MAIN_H

#include <check.h>

/* Run the suite; returns the process exit status. */
int run_suite(Suite *s);
/* 1 when M3IDX_BACKEND asks for the HIP backend. */
int suite_wants_hip(void);

#endif
