/*
 * cmd-bench.c - `m3idx bench' (filled in by the benchmark work).
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include "cli.h"

int cli_bench(int argc, char **argv) {
  (void)argc;
  (void)argv;
  cli_error("bench", "not available in this version");
  return CLI_EXIT_USAGE;
}
