/*
 * cmd-topk.c - `m3idx topk': one fused call on .npy inputs (SPEC section 12).
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call-inputs.h"
#include "cli.h"
#include "cmd-topk.h"
#include "npy.h"
#include "out-files.h"

static const char usage[] =
    "usage: m3idx topk --mode decode|prefill --query q.npy --query-dtype bf16|e4m3\n"
    "                  --pages pages.npy --block-table bt.npy --seq-lens sl.npy\n"
    "                  [--query-len N] [--cu-seqlens-q cu.npy --context-lens cl.npy]\n"
    "                  [--scale S] [--init-blocks I] [--local-blocks L]\n"
    "                  --out topk.npy [--scores-out scores.npy]\n"
    "                  [--backend cpu|hip|auto] [--threads N]\n"
    "Scores every causal 128-token block of each query row and writes the top-16\n"
    "block ids per (head, row) as int32 [H, rows, 16].  See m3idx(1).\n";

static int parse_args(int argc, char **argv, struct topk_args *a) {
  enum { O_OUT = CALL_O_END, O_SOUT, O_FORCE, O_HELP };
  static const struct option opts[] = {
      CALL_OPTIONS,
      {"out", required_argument, 0, O_OUT},
      {"scores-out", required_argument, 0, O_SOUT},
      {"force", no_argument, 0, O_FORCE},
      {"help", no_argument, 0, O_HELP},
      {0, 0, 0, 0}};
  memset(a, 0, sizeof *a);
  call_args_init(&a->call);
  static const char *const outputs[] = {"out", "scores-out", NULL};
  if (cli_refuse_abbreviated(argc, argv, opts, outputs, "topk") != 0)
    return -1;
  opterr = 0;
  optind = 0; /* 0: glibc forgets a previous parse, even one cut short */
  int c;
  while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (c) {
    case O_OUT: a->out = optarg; break;
    case O_SOUT: a->scores_out = optarg; break;
    case O_FORCE: a->force = 1; break;
    case O_HELP:
      fputs(usage, stdout);
      return 1;
    default:
      if (c >= CALL_O_MODE && c < CALL_O_END) {
        if (call_args_take(&a->call, c, optarg, "topk") != 0)
          return -1;
        break;
      }
      cli_error("topk", "unknown or incomplete option '%s'\n%s", argv[optind - 1], usage);
      return -1;
    }
  }
  if (optind < argc) {
    cli_error("topk", "unexpected argument '%s'", argv[optind]);
    return -1;
  }
  if (call_args_check(&a->call, "topk", usage) != 0)
    return -1;
  if (!a->out) {
    cli_error("topk", "--out is required\n%s", usage);
    return -1;
  }
  return 0;
}

/* Parse, refuse outputs that must not be written, read the inputs and
 * make room for the outputs: 0; CLI_TOPK_HELP after --help; or the exit
 * code after saying why. */
int cli_topk_prepare(int argc, char **argv, struct topk_job *j) {
  char err[1024];
  memset(j, 0, sizeof *j);
  out_init(&j->outs, 0);
  int parsed = parse_args(argc, argv, &j->a);
  if (parsed != 0)
    return parsed > 0 ? CLI_TOPK_HELP : CLI_EXIT_USAGE;
  /* The outputs first: a refusal costs no reading. */
  out_init(&j->outs, j->a.force);
  j->out_i = out_add(&j->outs, "--out", j->a.out);
  j->scores_i = j->a.scores_out ? out_add(&j->outs, "--scores-out", j->a.scores_out) : -1;
  const char *in_opts[6], *in_paths[6];
  int n_in = call_args_inputs(&j->a.call, in_opts, in_paths);
  if (out_check(&j->outs, n_in, in_opts, in_paths, err, sizeof err) != 0) {
    cli_error("topk", "%s", err);
    return CLI_EXIT_USAGE;
  }
  if (call_inputs_read(&j->a.call, "topk", &j->in) != 0)
    return CLI_EXIT_USAGE;
  size_t nrow = (size_t)j->in.heads * (size_t)j->in.rows;
  j->topk = malloc(nrow * M3IDX_TOPK * sizeof *j->topk + 1);
  if (j->a.scores_out) {
    j->scores = malloc(nrow * (size_t)j->in.width * sizeof *j->scores + 1);
    for (size_t i = 0; j->scores && i < nrow * (size_t)j->in.width; i++)
      j->scores[i] = -INFINITY; /* blocks past a row's causal count */
  }
  if (!j->topk || (j->a.scores_out && !j->scores)) {
    cli_error("topk", "no memory for the outputs");
    return CLI_EXIT_FAILURE;
  }
  return 0;
}

/* Write the outputs as one set: 0, or the exit code after saying why. */
int cli_topk_write(struct topk_job *j) {
  char err[1024];
  int64_t tshape[3] = {j->in.heads, j->in.rows, M3IDX_TOPK};
  int64_t sshape[3] = {j->in.heads, j->in.rows, j->in.width};
  if (npy_stage(&j->outs, j->out_i, "<i4", 3, tshape, j->topk, err, sizeof err) != 0 ||
      (j->scores_i >= 0 &&
       npy_stage(&j->outs, j->scores_i, "<f4", 3, sshape, j->scores, err, sizeof err) != 0) ||
      out_commit(&j->outs, err, sizeof err) != 0) {
    cli_error("topk", "%s", err);
    return CLI_EXIT_FAILURE;
  }
  return 0;
}

void cli_topk_free(struct topk_job *j) {
  out_discard(&j->outs);
  free(j->topk);
  free(j->scores);
  call_inputs_free(&j->in);
}

int cli_topk(int argc, char **argv) {
  struct topk_job j;
  m3idx_context *ctx = NULL;
  int rc = cli_topk_prepare(argc, argv, &j);
  if (rc != 0)
    goto out;
  rc = call_inputs_context(&j.a.call, &j.in, "topk", &ctx);
  if (rc != 0)
    goto out;
  const struct call_args *c = &j.a.call;
  const int64_t stride = j.scores ? j.in.width : 0;
  m3idx_status st =
      j.in.prefill
          ? m3idx_index_topk_prefill(ctx, &j.in.batch, &j.in.query, &j.in.kc, c->init_blocks,
                                     c->local_blocks, j.topk, j.scores, stride)
          : m3idx_index_topk_decode(ctx, &j.in.batch, &j.in.query, &j.in.kc, c->init_blocks,
                                    c->local_blocks, NULL, 0, j.topk, j.scores, stride);
  if (st == M3IDX_OK)
    st = m3idx_synchronize(ctx);
  if (st != M3IDX_OK) {
    cli_library_error("topk", st, m3idx_last_error(ctx));
    rc = st == M3IDX_ERR_DEVICE || st == M3IDX_ERR_NO_MEMORY ? CLI_EXIT_FAILURE : CLI_EXIT_USAGE;
    goto out;
  }
  rc = cli_topk_write(&j);
out:
  m3idx_context_destroy(ctx);
  cli_topk_free(&j);
  return rc == CLI_TOPK_HELP ? 0 : rc;
}
