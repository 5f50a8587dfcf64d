/*
 * cmd-verify.c - `m3idx verify': another indexer's top-k against the
 * exact scores (SPEC section 13): exact, equivalent or wrong per (head,
 * row), with the proof of each wrong row.  Exit 0 when no row is wrong,
 * 1 when one is, 2 on bad input.
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
#include "cmd-verify.h"
#include "npy.h"

static const char usage[] =
    "usage: m3idx verify --mode decode|prefill --query q.npy --query-dtype bf16|e4m3\n"
    "                    --pages pages.npy --block-table bt.npy --seq-lens sl.npy\n"
    "                    [--query-len N] [--cu-seqlens-q cu.npy --context-lens cl.npy]\n"
    "                    [--scale S] [--init-blocks I] [--local-blocks L]\n"
    "                    --candidate topk.npy [--candidate-scores scores.npy]\n"
    "                    [--order desc|any] [--query-rounding none|bf16|e4m3]\n"
    "                    [--tolerance-ulps N] [--tolerance-rel R] [--no-max-deviation]\n"
    "                    [--json] [--threads N] [--backend cpu|hip]\n"
    "Says, for every (head, row), whether the candidate's top-16 ids are m3idx's\n"
    "(exact), a top-k of scores within the bound of another summation order\n"
    "(equivalent), or wrong, with the pair of blocks that proves it.  See m3idx(1).\n";

static int parse_double(const char *s, double *out) {
  float f;
  if (cli_parse_float(s, &f) != 0 || !(f >= 0.0f) || isinf(f))
    return -1;
  *out = f;
  return 0;
}

static int parse_args(int argc, char **argv, struct verify_args *a) {
  enum { O_CAND = CALL_O_END, O_CSCORES, O_ORDER, O_ROUNDING, O_ULPS, O_REL, O_NO_DEV, O_JSON,
         O_HELP };
  static const struct option opts[] = {
      CALL_OPTIONS,
      {"candidate", required_argument, 0, O_CAND},
      {"candidate-scores", required_argument, 0, O_CSCORES},
      {"order", required_argument, 0, O_ORDER},
      {"query-rounding", required_argument, 0, O_ROUNDING},
      {"tolerance-ulps", required_argument, 0, O_ULPS},
      {"tolerance-rel", required_argument, 0, O_REL},
      {"no-max-deviation", no_argument, 0, O_NO_DEV},
      {"json", no_argument, 0, O_JSON},
      {"help", no_argument, 0, O_HELP},
      {0, 0, 0, 0}};
  memset(a, 0, sizeof *a);
  call_args_init(&a->call);
  a->call.backend = M3IDX_BACKEND_CPU; /* the reference's; --backend hip gives the same */
  m3idx_verify_options_init(&a->opts);
  opterr = 0;
  optind = 0;
  int c;
  while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (c) {
    case O_CAND: a->candidate = optarg; break;
    case O_CSCORES: a->candidate_scores = optarg; break;
    case O_JSON: a->json = 1; break;
    case O_NO_DEV: a->opts.flags |= M3IDX_VERIFY_NO_MAX_DEVIATION; break;
    case O_ORDER:
      if (!strcmp(optarg, "desc") || !strcmp(optarg, "any")) {
        a->opts.order = optarg[0] == 'd' ? M3IDX_ORDER_DESC : M3IDX_ORDER_ANY;
        break;
      }
      cli_error("verify", "--order '%s' is not desc or any", optarg);
      return -1;
    case O_ROUNDING:
      if (!strcmp(optarg, "none") || !strcmp(optarg, "bf16") || !strcmp(optarg, "e4m3")) {
        a->opts.query_rounding = !strcmp(optarg, "none")   ? M3IDX_QUERY_ROUNDING_NONE
                                 : !strcmp(optarg, "bf16") ? M3IDX_QUERY_ROUNDING_BF16
                                                           : M3IDX_QUERY_ROUNDING_E4M3;
        break;
      }
      cli_error("verify", "--query-rounding '%s' is not none, bf16 or e4m3", optarg);
      return -1;
    case O_ULPS:
    case O_REL:
      if (parse_double(optarg, c == O_ULPS ? &a->opts.tolerance_ulps
                                           : &a->opts.tolerance_rel) != 0) {
        cli_error("verify", "%s '%s' is not a finite number >= 0",
                  c == O_ULPS ? "--tolerance-ulps" : "--tolerance-rel", optarg);
        return -1;
      }
      break;
    case O_HELP:
      fputs(usage, stdout);
      return 1;
    default:
      if (c >= CALL_O_MODE && c < CALL_O_END) {
        if (call_args_take(&a->call, c, optarg, "verify") != 0)
          return -1;
        break;
      }
      cli_error("verify", "unknown or incomplete option '%s'\n%s", argv[optind - 1], usage);
      return -1;
    }
  }
  if (optind < argc) {
    cli_error("verify", "unexpected argument '%s'", argv[optind]);
    return -1;
  }
  if (call_args_check(&a->call, "verify", usage) != 0)
    return -1;
  if (!a->candidate) {
    cli_error("verify", "--candidate is required\n%s", usage);
    return -1;
  }
  return 0;
}

static const char *reason_name(int32_t r) {
  static const char *const names[] = {"none", "id-range", "duplicate", "count", "padding",
                                      "forced", "set", "order", "score"};
  return r >= 0 && r <= M3IDX_REASON_SCORE ? names[r] : "?";
}

/* One wrong row's proof, in words. */
static void say_wrong(int32_t h, int32_t row, const m3idx_verify_row *v) {
  printf("wrong: head %d row %d: ", (int)h, (int)row);
  switch (v->reason) {
  case M3IDX_REASON_SET:
    printf("block %d, left out, beats block %d, taken, by %.3g bounds (set)\n", (int)v->block_b,
           (int)v->block_a, (double)v->gap);
    break;
  case M3IDX_REASON_ORDER:
    printf("block %d (slot %d) beats block %d before it by %.3g bounds (order)\n",
           (int)v->block_b, (int)v->slot + 1, (int)v->block_a, (double)v->gap);
    break;
  case M3IDX_REASON_SCORE:
    printf("block %d's score is %.3g bounds from the exact one (score)\n", (int)v->block_a,
           (double)v->gap);
    break;
  case M3IDX_REASON_FORCED:
    printf("forced block %d is missing (forced)\n", (int)v->block_a);
    break;
  default:
    printf("slot %d holds %d (%s)\n", (int)v->slot, (int)v->block_a, reason_name(v->reason));
  }
}

static void report(const struct verify_args *a, const struct call_inputs *in,
                   const m3idx_verify_row *rows, const m3idx_verify_summary *s) {
  const int64_t pairs = (int64_t)in->heads * in->rows;
  if (a->json) {
    /* JSON has no inf or NaN: an infinite deviation is 1e308, one not
       computed (--no-max-deviation) null. */
    char dev[32];
    if (isnan(s->max_score_deviation))
      snprintf(dev, sizeof dev, "null");
    else
      snprintf(dev, sizeof dev, "%.9g",
               isfinite(s->max_score_deviation) ? s->max_score_deviation : 1e308);
    printf("{\"rows\": %lld, \"exact\": %lld, \"equivalent\": %lld, \"wrong\": %lld, "
           "\"max_score_deviation\": %s, \"wrong_rows\": [",
           (long long)s->rows, (long long)s->exact, (long long)s->equivalent,
           (long long)s->wrong, dev);
    const char *sep = "";
    for (int64_t i = 0; i < pairs; i++) {
      const m3idx_verify_row *v = &rows[i];
      if (v->verdict != M3IDX_VERDICT_WRONG)
        continue;
      printf("%s{\"head\": %lld, \"row\": %lld, \"reason\": \"%s\", \"slot\": %d, "
             "\"block_a\": %d, \"block_b\": %d, \"gap\": %.9g}",
             sep, (long long)(i / in->rows), (long long)(i % in->rows), reason_name(v->reason),
             (int)v->slot, (int)v->block_a, (int)v->block_b,
             isfinite(v->gap) ? (double)v->gap : 1e308);
      sep = ", ";
    }
    printf("]}\n");
    return;
  }
  printf("%lld (head, row) pairs: %lld exact, %lld equivalent, %lld wrong\n",
         (long long)s->rows, (long long)s->exact, (long long)s->equivalent,
         (long long)s->wrong);
  int shown = 0;
  for (int64_t i = 0; i < pairs && shown < 20; i++)
    if (rows[i].verdict == M3IDX_VERDICT_WRONG) {
      say_wrong((int32_t)(i / in->rows), (int32_t)(i % in->rows), &rows[i]);
      shown++;
    }
  if (s->wrong > shown)
    printf("... and %lld more wrong rows (--json lists them all)\n",
           (long long)(s->wrong - shown));
  if (a->candidate_scores && !isnan(s->max_score_deviation))
    printf("largest candidate-score deviation: %.3g of the bound\n", s->max_score_deviation);
}

int cli_verify_prepare(int argc, char **argv, struct verify_job *j) {
  char err[1024];
  memset(j, 0, sizeof *j);
  int parsed = parse_args(argc, argv, &j->a);
  if (parsed != 0)
    return parsed > 0 ? CLI_VERIFY_HELP : CLI_EXIT_USAGE;
  if (call_inputs_read(&j->a.call, "verify", &j->in) != 0)
    return CLI_EXIT_USAGE;
  const struct call_inputs *in = &j->in;
  if (npy_read(j->a.candidate, "--candidate", "<i4", 3, &j->cand, err, sizeof err) != 0 ||
      (j->a.candidate_scores && npy_read(j->a.candidate_scores, "--candidate-scores", "<f4", 3,
                                         &j->cscores, err, sizeof err) != 0)) {
    cli_error("verify", "%s", err);
    return CLI_EXIT_USAGE;
  }
  if (j->cand.shape[0] != in->heads || j->cand.shape[1] != in->rows ||
      j->cand.shape[2] != M3IDX_TOPK) {
    cli_error("verify", "--candidate has shape [%lld, %lld, %lld], expected [%d, %d, %d]",
              (long long)j->cand.shape[0], (long long)j->cand.shape[1],
              (long long)j->cand.shape[2], (int)in->heads, (int)in->rows, M3IDX_TOPK);
    return CLI_EXIT_USAGE;
  }
  if (j->a.candidate_scores &&
      (j->cscores.shape[0] != in->heads || j->cscores.shape[1] != in->rows ||
       j->cscores.shape[2] < in->width)) {
    cli_error("verify", "--candidate-scores has shape [%lld, %lld, %lld], expected [%d, %d, >= %d]",
              (long long)j->cscores.shape[0], (long long)j->cscores.shape[1],
              (long long)j->cscores.shape[2], (int)in->heads, (int)in->rows, (int)in->width);
    return CLI_EXIT_USAGE;
  }
  j->rows = malloc(sizeof *j->rows * ((size_t)in->heads * (size_t)in->rows + 1));
  if (j->rows == NULL) {
    cli_error("verify", "no memory for the verdicts");
    return CLI_EXIT_FAILURE;
  }
  return 0;
}

int cli_verify_report(const struct verify_job *j, const m3idx_verify_summary *sum) {
  report(&j->a, &j->in, j->rows, sum);
  return sum->wrong > 0 ? CLI_EXIT_FAILURE : 0;
}

void cli_verify_free(struct verify_job *j) {
  free(j->rows);
  npy_free(&j->cand);
  npy_free(&j->cscores);
  call_inputs_free(&j->in);
}

int cli_verify(int argc, char **argv) {
  struct verify_job j;
  m3idx_context *ctx = NULL;
  int rc = cli_verify_prepare(argc, argv, &j);
  if (rc == 0)
    rc = call_inputs_context(&j.a.call, &j.in, "verify", &ctx);
  if (rc != 0)
    goto out;
  m3idx_verify_summary sum;
  const struct call_args *c = &j.a.call;
  m3idx_status st = m3idx_verify_topk(ctx, &j.in.batch, &j.in.query, &j.in.kc, c->init_blocks,
                                      c->local_blocks, j.cand.data,
                                      j.a.candidate_scores ? j.cscores.data : NULL,
                                      j.a.candidate_scores ? j.cscores.shape[2] : 0, &j.a.opts,
                                      j.rows, &sum);
  if (st != M3IDX_OK) {
    cli_library_error("verify", st, m3idx_last_error(ctx));
    rc = st == M3IDX_ERR_NO_MEMORY ? CLI_EXIT_FAILURE : CLI_EXIT_USAGE;
    goto out;
  }
  rc = cli_verify_report(&j, &sum);
out:
  m3idx_context_destroy(ctx);
  cli_verify_free(&j);
  return rc == CLI_VERIFY_HELP ? 0 : rc;
}
