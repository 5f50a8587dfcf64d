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

struct topk_args {
  struct call_args call;
  const char *out, *scores_out;
  int force;
};

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

int cli_topk(int argc, char **argv) {
  struct topk_args a;
  struct call_inputs in;
  struct out_set outs;
  char err[1024];
  int rc = CLI_EXIT_USAGE;
  m3idx_context *ctx = NULL;
  int32_t *topk = NULL;
  float *scores = NULL;
  int parsed = parse_args(argc, argv, &a);
  if (parsed != 0)
    return parsed > 0 ? 0 : CLI_EXIT_USAGE;
  memset(&in, 0, sizeof in);

  /* The outputs first: a refusal costs no reading. */
  out_init(&outs, a.force);
  int out_i = out_add(&outs, "--out", a.out);
  int scores_i = a.scores_out ? out_add(&outs, "--scores-out", a.scores_out) : -1;
  const char *in_opts[6], *in_paths[6];
  int n_in = call_args_inputs(&a.call, in_opts, in_paths);
  if (out_check(&outs, n_in, in_opts, in_paths, err, sizeof err) != 0) {
    cli_error("topk", "%s", err);
    goto out;
  }
  if (call_inputs_read(&a.call, "topk", &in) != 0)
    goto out;
  rc = call_inputs_context(&a.call, &in, "topk", &ctx);
  if (rc != 0)
    goto out;
  size_t nrow = (size_t)in.heads * (size_t)in.rows;
  topk = malloc(nrow * M3IDX_TOPK * sizeof *topk + 1);
  if (a.scores_out) {
    scores = malloc(nrow * (size_t)in.width * sizeof *scores + 1);
    for (size_t i = 0; scores && i < nrow * (size_t)in.width; i++)
      scores[i] = -INFINITY; /* blocks past a row's causal count */
  }
  if (!topk || (a.scores_out && !scores)) {
    cli_error("topk", "no memory for the outputs");
    rc = CLI_EXIT_FAILURE;
    goto out;
  }
  const struct call_args *c = &a.call;
  m3idx_status st =
      in.prefill ? m3idx_index_topk_prefill(ctx, &in.batch, &in.query, &in.kc, c->init_blocks,
                                            c->local_blocks, topk, scores,
                                            scores ? in.width : 0)
                 : m3idx_index_topk_decode(ctx, &in.batch, &in.query, &in.kc, c->init_blocks,
                                           c->local_blocks, NULL, 0, topk, scores,
                                           scores ? in.width : 0);
  if (st == M3IDX_OK)
    st = m3idx_synchronize(ctx);
  if (st != M3IDX_OK) {
    cli_library_error("topk", st, m3idx_last_error(ctx));
    rc = st == M3IDX_ERR_DEVICE || st == M3IDX_ERR_NO_MEMORY ? CLI_EXIT_FAILURE : CLI_EXIT_USAGE;
    goto out;
  }
  int64_t tshape[3] = {in.heads, in.rows, M3IDX_TOPK}, sshape[3] = {in.heads, in.rows, in.width};
  rc = CLI_EXIT_FAILURE;
  if (npy_stage(&outs, out_i, "<i4", 3, tshape, topk, err, sizeof err) != 0 ||
      (scores_i >= 0 &&
       npy_stage(&outs, scores_i, "<f4", 3, sshape, scores, err, sizeof err) != 0) ||
      out_commit(&outs, err, sizeof err) != 0) {
    cli_error("topk", "%s", err);
    goto out;
  }
  rc = 0;
out:
  out_discard(&outs);
  m3idx_context_destroy(ctx);
  free(topk);
  free(scores);
  call_inputs_free(&in);
  return rc;
}
