/*
 * main.c - the m3idx command: the default job, topk, encode, bench.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
    "usage: m3idx                      run the default job (synthetic batch, every backend)\n"
    "       m3idx topk [options]       top-k block ids of .npy inputs (m3idx topk --help)\n"
    "       m3idx verify [options]     another indexer's top-k: exact, equivalent or wrong\n"
    "       m3idx encode [options]     fp32 keys to MXFP4 pages (m3idx encode --help)\n"
    "       m3idx bench [options]      benchmarks (m3idx bench --help)\n"
    "       m3idx --help | --version\n"
    "Environment: M3IDX_BACKEND=cpu|hip|auto, OMP_NUM_THREADS.  See m3idx(1), m3idx(7).\n";

/* What the command printed must have reached standard output: a full
 * disk, a closed descriptor or a reader that went away is a failure, not
 * success (the check gnulib's close_stdout makes). */
static int stdout_delivered(int rc) {
  int failed = fflush(stdout) != 0 || ferror(stdout);
  int e = errno;
  if (fclose(stdout) != 0 && !failed) {
    failed = 1;
    e = errno;
  }
  if (!failed)
    return rc;
  fprintf(stderr, "m3idx: cannot write to standard output: %s\n", strerror(e));
  return rc != 0 ? rc : CLI_EXIT_FAILURE;
}

static int run(int argc, char **argv) {
  if (argc < 2)
    return cli_default_job(argc, argv);
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
    fputs(usage, stdout);
    return 0;
  }
  if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
    const char *why = m3idx_backend_unavailable_reason(M3IDX_BACKEND_HIP);
    printf("m3idx %s (library %s)\n", PACKAGE_VERSION, m3idx_version());
    printf("cpu: yes\n");
    printf("hip: %s%s%s\n", why ? "no (" : "yes", why ? why : "", why ? ")" : "");
    return 0;
  }
  if (!strcmp(cmd, "topk"))
    return cli_topk(argc - 1, argv + 1);
  if (!strcmp(cmd, "verify"))
    return cli_verify(argc - 1, argv + 1);
  if (!strcmp(cmd, "encode"))
    return cli_encode(argc - 1, argv + 1);
  if (!strcmp(cmd, "bench"))
    return cli_bench(argc - 1, argv + 1);
  cli_error(NULL, "unknown command '%s'\n%s", cmd, usage);
  return CLI_EXIT_USAGE;
}

int main(int argc, char **argv) { return stdout_delivered(run(argc, argv)); }
