/*
 * cmd-topk.h - `m3idx topk' in three steps, so that m3idx-mpi takes the
 * same arguments and writes the same files: prepare (parse, refuse bad
 * outputs, read the inputs), compute (one process, or every rank), write.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_CLI_CMD_TOPK_H
#define M3IDX_CLI_CMD_TOPK_H

#include "call-inputs.h"
#include "out-files.h"

struct topk_args {
  struct call_args call;
  const char *out, *scores_out;
  int force;
};

struct topk_job {
  struct topk_args a;
  struct call_inputs in;
  struct out_set outs;
  int out_i, scores_i;
  int32_t *topk;  /* [H, rows, 16] */
  float *scores;  /* [H, rows, width], -inf past each row's causal blocks; NULL without --scores-out */
};

/* 0; CLI_TOPK_HELP after --help (printed); or the exit code after saying
 * why. */
#define CLI_TOPK_HELP (-1)
int cli_topk_prepare(int argc, char **argv, struct topk_job *j);
/* 0, or the exit code after saying why. */
int cli_topk_write(struct topk_job *j);
void cli_topk_free(struct topk_job *j);

#endif
