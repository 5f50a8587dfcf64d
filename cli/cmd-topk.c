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
#include <unistd.h>

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
  const char *mode, *query, *dtype, *pages, *bt, *seq_lens, *cu, *ctx, *out, *scores_out;
  int32_t query_len, init_blocks, local_blocks, threads;
  int have_query_len, force;
  float scale;
  m3idx_backend backend;
};

static int parse_args(int argc, char **argv, struct topk_args *a) {
  enum { O_MODE = 256, O_QUERY, O_DTYPE, O_PAGES, O_BT, O_SL, O_QLEN, O_CU, O_CTX,
         O_SCALE, O_INIT, O_LOCAL, O_OUT, O_SOUT, O_BACKEND, O_THREADS, O_FORCE, O_HELP };
  static const struct option opts[] = {
      {"mode", required_argument, 0, O_MODE},
      {"query", required_argument, 0, O_QUERY},
      {"query-dtype", required_argument, 0, O_DTYPE},
      {"pages", required_argument, 0, O_PAGES},
      {"block-table", required_argument, 0, O_BT},
      {"seq-lens", required_argument, 0, O_SL},
      {"query-len", required_argument, 0, O_QLEN},
      {"cu-seqlens-q", required_argument, 0, O_CU},
      {"context-lens", required_argument, 0, O_CTX},
      {"scale", required_argument, 0, O_SCALE},
      {"init-blocks", required_argument, 0, O_INIT},
      {"local-blocks", required_argument, 0, O_LOCAL},
      {"out", required_argument, 0, O_OUT},
      {"scores-out", required_argument, 0, O_SOUT},
      {"backend", required_argument, 0, O_BACKEND},
      {"threads", required_argument, 0, O_THREADS},
      {"force", no_argument, 0, O_FORCE},
      {"help", no_argument, 0, O_HELP},
      {0, 0, 0, 0}};
  memset(a, 0, sizeof *a);
  a->query_len = 1;
  a->scale = 1.0f;
  a->local_blocks = 1;
  a->backend = M3IDX_BACKEND_AUTO;
  static const char *const outputs[] = {"out", "scores-out", NULL};
  if (cli_refuse_abbreviated(argc, argv, opts, outputs, "topk") != 0)
    return -1;
  opterr = 0;
  optind = 0; /* 0: glibc forgets a previous parse, even one cut short */
  int c;
  while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (c) {
    case O_MODE: a->mode = optarg; break;
    case O_QUERY: a->query = optarg; break;
    case O_DTYPE: a->dtype = optarg; break;
    case O_PAGES: a->pages = optarg; break;
    case O_BT: a->bt = optarg; break;
    case O_SL: a->seq_lens = optarg; break;
    case O_CU: a->cu = optarg; break;
    case O_CTX: a->ctx = optarg; break;
    case O_OUT: a->out = optarg; break;
    case O_SOUT: a->scores_out = optarg; break;
    case O_QLEN:
      if (cli_parse_int(optarg, INT32_MIN, INT32_MAX, &a->query_len) != 0) {
        cli_error("topk", "--query-len '%s' is not an integer", optarg);
        return -1;
      }
      a->have_query_len = 1;
      break;
    case O_SCALE:
      if (cli_parse_float(optarg, &a->scale) != 0) {
        cli_error("topk", "--scale '%s' is not a number", optarg);
        return -1;
      }
      break;
    case O_INIT:
      if (cli_parse_int(optarg, INT32_MIN, INT32_MAX, &a->init_blocks) != 0) {
        cli_error("topk", "--init-blocks '%s' is not an integer", optarg);
        return -1;
      }
      break;
    case O_LOCAL:
      if (cli_parse_int(optarg, INT32_MIN, INT32_MAX, &a->local_blocks) != 0) {
        cli_error("topk", "--local-blocks '%s' is not an integer", optarg);
        return -1;
      }
      break;
    case O_BACKEND:
      if (cli_parse_backend(optarg, &a->backend) != 0) {
        cli_error("topk", "--backend '%s' is not cpu, hip or auto", optarg);
        return -1;
      }
      break;
    case O_THREADS:
      if (cli_parse_int(optarg, 0, M3IDX_MAX_THREADS, &a->threads) != 0) {
        cli_error("topk", "--threads '%s' is not an integer in [0, %d]", optarg,
                  M3IDX_MAX_THREADS);
        return -1;
      }
      break;
    case O_FORCE: a->force = 1; break;
    case O_HELP:
      fputs(usage, stdout);
      return 1;
    default:
      cli_error("topk", "unknown or incomplete option '%s'\n%s", argv[optind - 1], usage);
      return -1;
    }
  }
  if (optind < argc) {
    cli_error("topk", "unexpected argument '%s'", argv[optind]);
    return -1;
  }
  const char *missing = !a->mode ? "--mode" : !a->query ? "--query" : !a->dtype ? "--query-dtype"
                        : !a->pages ? "--pages" : !a->bt ? "--block-table"
                        : !a->seq_lens ? "--seq-lens" : !a->out ? "--out" : NULL;
  if (missing) {
    cli_error("topk", "%s is required\n%s", missing, usage);
    return -1;
  }
  if (strcmp(a->mode, "decode") != 0 && strcmp(a->mode, "prefill") != 0) {
    cli_error("topk", "--mode '%s' is not decode or prefill", a->mode);
    return -1;
  }
  if (strcmp(a->dtype, "bf16") != 0 && strcmp(a->dtype, "e4m3") != 0) {
    cli_error("topk", "--query-dtype '%s' is not bf16 or e4m3", a->dtype);
    return -1;
  }
  int prefill = !strcmp(a->mode, "prefill");
  if (prefill && (!a->cu || !a->ctx)) {
    cli_error("topk", "--mode prefill needs --cu-seqlens-q and --context-lens");
    return -1;
  }
  if (!prefill && (a->cu || a->ctx)) {
    cli_error("topk", "--cu-seqlens-q and --context-lens are for --mode prefill only");
    return -1;
  }
  if (prefill && a->have_query_len) {
    cli_error("topk", "--query-len is for --mode decode only (prefill rows come from --cu-seqlens-q)");
    return -1;
  }
  return 0;
}

static int fits_int32(int64_t v) { return v >= 0 && v <= INT32_MAX; }

/* The inputs' shapes agree, and every request's blocks fit the block table:
 * checked before anything is sized from the values, so bad input costs no
 * memory (the library checks the rest of SPEC section 11). */
static int check_shapes(const struct topk_args *a, int prefill, const struct npy_array *q,
                        const struct npy_array *pages, const struct npy_array *bt,
                        const struct npy_array *sl, const struct npy_array *cu,
                        const struct npy_array *cl) {
  int64_t reqs = sl->shape[0];
  if (reqs < 1 || !fits_int32(reqs)) {
    cli_error("topk", "--seq-lens has %lld requests; it needs at least 1", (long long)reqs);
    return -1;
  }
  if (bt->shape[0] != reqs) {
    cli_error("topk", "--block-table has %lld rows, but --seq-lens has %lld requests",
              (long long)bt->shape[0], (long long)reqs);
    return -1;
  }
  if (bt->shape[1] < 1 || !fits_int32(bt->shape[1])) {
    cli_error("topk", "--block-table has %lld columns", (long long)bt->shape[1]);
    return -1;
  }
  if (pages->shape[1] != M3IDX_PAGE_BYTES || !fits_int32(pages->shape[0])) {
    cli_error("topk", "--pages has shape [%lld, %lld], expected [num_pages, %d]",
              (long long)pages->shape[0], (long long)pages->shape[1], M3IDX_PAGE_BYTES);
    return -1;
  }
  if (q->shape[2] != M3IDX_HEAD_DIM || q->shape[1] < 1 || !fits_int32(q->shape[0]) ||
      !fits_int32(q->shape[1]) || !fits_int32(q->shape[0] * q->shape[1])) {
    cli_error("topk", "--query has shape [%lld, %lld, %lld], expected [rows, heads >= 1, %d]",
              (long long)q->shape[0], (long long)q->shape[1], (long long)q->shape[2],
              M3IDX_HEAD_DIM);
    return -1;
  }
  if (prefill && (cu->shape[0] != reqs + 1 || cl->shape[0] != reqs)) {
    cli_error("topk", "--cu-seqlens-q has %lld entries and --context-lens %lld; "
              "%lld requests need %lld and %lld",
              (long long)cu->shape[0], (long long)cl->shape[0], (long long)reqs,
              (long long)reqs + 1, (long long)reqs);
    return -1;
  }
  if (!prefill && a->query_len >= 1 && q->shape[0] != reqs * (int64_t)a->query_len) {
    cli_error("topk", "--query has %lld rows, but %lld requests x --query-len %d need %lld",
              (long long)q->shape[0], (long long)reqs, (int)a->query_len,
              (long long)reqs * a->query_len);
    return -1;
  }
  const int32_t *seq = sl->data;
  const int32_t *cu_q = prefill ? cu->data : NULL;
  for (int64_t r = 0; r < reqs; r++) {
    /* A prefill request with no rows reads no block. */
    int no_rows = prefill && cu_q[r + 1] == cu_q[r];
    int64_t blocks = seq[r] > 0 && !no_rows
                         ? ((int64_t)seq[r] + M3IDX_BLOCK_SIZE - 1) / M3IDX_BLOCK_SIZE
                         : 0;
    if (blocks > bt->shape[1]) {
      cli_error("topk", "--seq-lens[%lld] is %d: %lld blocks, more than the %lld columns "
                "of --block-table", (long long)r, (int)seq[r], (long long)blocks,
                (long long)bt->shape[1]);
      return -1;
    }
  }
  return 0;
}

int cli_topk(int argc, char **argv) {
  struct topk_args a;
  struct npy_array q = {0}, pages = {0}, bt = {0}, sl = {0}, cu = {0}, cl = {0};
  struct out_set outs;
  char err[1024];
  int rc = CLI_EXIT_USAGE;
  m3idx_context *ctx = NULL;
  int32_t *topk = NULL;
  float *scores = NULL;
  int parsed = parse_args(argc, argv, &a);
  if (parsed != 0)
    return parsed > 0 ? 0 : CLI_EXIT_USAGE;
  int prefill = !strcmp(a.mode, "prefill");
  int bf16 = !strcmp(a.dtype, "bf16");

  /* The outputs first: a refusal costs no reading. */
  out_init(&outs, a.force);
  int out_i = out_add(&outs, "--out", a.out);
  int scores_i = a.scores_out ? out_add(&outs, "--scores-out", a.scores_out) : -1;
  const char *in_opts[] = {"--query", "--pages", "--block-table", "--seq-lens",
                           "--cu-seqlens-q", "--context-lens"};
  const char *in_paths[] = {a.query, a.pages, a.bt, a.seq_lens, a.cu, a.ctx};
  if (out_check(&outs, 6, in_opts, in_paths, err, sizeof err) != 0) {
    cli_error("topk", "%s", err);
    goto out;
  }

#define READ(arr, path, opt, descr, nd)                                     \
  if (npy_read(path, opt, descr, nd, &arr, err, sizeof err) != 0) {         \
    cli_error("topk", "%s", err);                                           \
    goto out;                                                               \
  }
  READ(sl, a.seq_lens, "--seq-lens", "<i4", 1);
  READ(bt, a.bt, "--block-table", "<i4", 2);
  READ(pages, a.pages, "--pages", "|u1", 2);
  READ(q, a.query, "--query", bf16 ? "<u2" : "|u1", 3);
  if (prefill) {
    READ(cu, a.cu, "--cu-seqlens-q", "<i4", 1);
    READ(cl, a.ctx, "--context-lens", "<i4", 1);
  }
#undef READ
  if (check_shapes(&a, prefill, &q, &pages, &bt, &sl, &cu, &cl) != 0)
    goto out;

  int64_t reqs = sl.shape[0];
  const int32_t *seq = sl.data;
  int32_t max_seq = 1;
  for (int64_t r = 0; r < reqs; r++)
    if (seq[r] > max_seq)
      max_seq = seq[r];
  int32_t rows = (int32_t)q.shape[0], heads = (int32_t)q.shape[1];
  m3idx_batch batch = {
      .mode = prefill ? M3IDX_MODE_PREFILL : M3IDX_MODE_DECODE,
      .num_reqs = (int32_t)reqs, .num_heads = heads, .num_rows = rows,
      .max_seq_len = max_seq, .seq_lens = seq, .query_len = prefill ? 0 : a.query_len,
      .cu_seqlens_q = prefill ? cu.data : NULL, .context_lens = prefill ? cl.data : NULL};
  m3idx_query query = {q.data, bf16 ? M3IDX_DTYPE_BF16 : M3IDX_DTYPE_E4M3, a.scale};
  m3idx_kcache kc = {pages.data, (int32_t)pages.shape[0], bt.data, (int32_t)bt.shape[1]};

  m3idx_options o;
  m3idx_options_init(&o);
  o.backend = a.backend;
  o.threads = a.threads;
  o.max_reqs = (int32_t)reqs;
  /* A call with no rows sizes nothing (m3idx_score_prefill(3)). */
  o.max_model_len = rows > 0 ? max_seq : 1;
  o.max_rows = rows > 0 ? rows : 1;
  o.max_heads = rows > 0 ? heads : 1;
  o.flags = M3IDX_FLAG_HOST_POINTERS;
  m3idx_status st = m3idx_context_create(&o, &ctx);
  if (st != M3IDX_OK) {
    cli_library_error("topk", st, m3idx_last_error(NULL));
    rc = st == M3IDX_ERR_BACKEND_UNAVAILABLE || st == M3IDX_ERR_NO_MEMORY ? CLI_EXIT_FAILURE
                                                                         : CLI_EXIT_USAGE;
    goto out;
  }
  /* ceil(max_seq / 128) without overflow: max_seq may be INT32_MAX. */
  int32_t width = max_seq / M3IDX_BLOCK_SIZE + (max_seq % M3IDX_BLOCK_SIZE != 0);
  size_t nrow = (size_t)heads * (size_t)rows;
  topk = malloc(nrow * M3IDX_TOPK * sizeof *topk + 1);
  if (a.scores_out) {
    scores = malloc(nrow * (size_t)width * sizeof *scores + 1);
    for (size_t i = 0; scores && i < nrow * (size_t)width; i++)
      scores[i] = -INFINITY; /* blocks past a row's causal count */
  }
  if (!topk || (a.scores_out && !scores)) {
    cli_error("topk", "no memory for the outputs");
    rc = CLI_EXIT_FAILURE;
    goto out;
  }
  st = prefill ? m3idx_index_topk_prefill(ctx, &batch, &query, &kc, a.init_blocks,
                                          a.local_blocks, topk, scores, scores ? width : 0)
               : m3idx_index_topk_decode(ctx, &batch, &query, &kc, a.init_blocks,
                                         a.local_blocks, NULL, 0, topk, scores,
                                         scores ? width : 0);
  if (st == M3IDX_OK)
    st = m3idx_synchronize(ctx);
  if (st != M3IDX_OK) {
    cli_library_error("topk", st, m3idx_last_error(ctx));
    rc = st == M3IDX_ERR_DEVICE || st == M3IDX_ERR_NO_MEMORY ? CLI_EXIT_FAILURE : CLI_EXIT_USAGE;
    goto out;
  }
  int64_t tshape[3] = {heads, rows, M3IDX_TOPK}, sshape[3] = {heads, rows, width};
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
  npy_free(&q);
  npy_free(&pages);
  npy_free(&bt);
  npy_free(&sl);
  npy_free(&cu);
  npy_free(&cl);
  return rc;
}
