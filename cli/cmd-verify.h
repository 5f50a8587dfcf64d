/*
 * cmd-verify.h - `m3idx verify' in three steps, so that m3idx-mpi takes the
 * same arguments and prints the same report: prepare (parse, read the
 * inputs and the candidate), verify (one process, or every rank), report.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_CLI_CMD_VERIFY_H
#define M3IDX_CLI_CMD_VERIFY_H

#include "call-inputs.h"

struct verify_args {
  struct call_args call;
  const char *candidate, *candidate_scores;
  m3idx_verify_options opts;
  int json;
};

struct verify_job {
  struct verify_args a;
  struct call_inputs in;
  struct npy_array cand, cscores;
  m3idx_verify_row *rows; /* [H, rows] */
};

/* 0; CLI_VERIFY_HELP after --help (printed); or the exit code after
 * saying why. */
#define CLI_VERIFY_HELP (-1)
int cli_verify_prepare(int argc, char **argv, struct verify_job *j);
/* Print the report; the exit code (1 when a row is wrong). */
int cli_verify_report(const struct verify_job *j, const m3idx_verify_summary *sum);
void cli_verify_free(struct verify_job *j);

#endif
