/*
 * call-inputs.c - the inputs of one fused call, shared by `m3idx topk' and
 * `m3idx verify' (see call-inputs.h).
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "call-inputs.h"
#include "cli.h"

void call_args_init(struct call_args *a) {
  memset(a, 0, sizeof *a);
  a->query_len = 1;
  a->scale = 1.0f;
  a->local_blocks = 1;
  a->backend = M3IDX_BACKEND_AUTO;
}

int call_args_take(struct call_args *a, int opt, const char *arg, const char *sub) {
  switch (opt) {
  case CALL_O_MODE: a->mode = arg; return 0;
  case CALL_O_QUERY: a->query = arg; return 0;
  case CALL_O_DTYPE: a->dtype = arg; return 0;
  case CALL_O_PAGES: a->pages = arg; return 0;
  case CALL_O_BT: a->bt = arg; return 0;
  case CALL_O_SL: a->seq_lens = arg; return 0;
  case CALL_O_CU: a->cu = arg; return 0;
  case CALL_O_CTX: a->ctx = arg; return 0;
  case CALL_O_QLEN:
    if (cli_parse_int(arg, INT32_MIN, INT32_MAX, &a->query_len) != 0) {
      cli_error(sub, "--query-len '%s' is not an integer", arg);
      return -1;
    }
    a->have_query_len = 1;
    return 0;
  case CALL_O_SCALE:
    if (cli_parse_float(arg, &a->scale) != 0) {
      cli_error(sub, "--scale '%s' is not a number", arg);
      return -1;
    }
    return 0;
  case CALL_O_INIT:
    if (cli_parse_int(arg, INT32_MIN, INT32_MAX, &a->init_blocks) != 0) {
      cli_error(sub, "--init-blocks '%s' is not an integer", arg);
      return -1;
    }
    return 0;
  case CALL_O_LOCAL:
    if (cli_parse_int(arg, INT32_MIN, INT32_MAX, &a->local_blocks) != 0) {
      cli_error(sub, "--local-blocks '%s' is not an integer", arg);
      return -1;
    }
    return 0;
  case CALL_O_BACKEND:
    if (cli_parse_backend(arg, &a->backend) != 0) {
      cli_error(sub, "--backend '%s' is not cpu, hip or auto", arg);
      return -1;
    }
    return 0;
  case CALL_O_THREADS:
    if (cli_parse_int(arg, 0, M3IDX_MAX_THREADS, &a->threads) != 0) {
      cli_error(sub, "--threads '%s' is not an integer in [0, %d]", arg, M3IDX_MAX_THREADS);
      return -1;
    }
    return 0;
  }
  return -1;
}

int call_args_check(const struct call_args *a, const char *sub, const char *usage) {
  const char *missing = !a->mode ? "--mode" : !a->query ? "--query" : !a->dtype ? "--query-dtype"
                        : !a->pages ? "--pages" : !a->bt ? "--block-table"
                        : !a->seq_lens ? "--seq-lens" : NULL;
  if (missing) {
    cli_error(sub, "%s is required\n%s", missing, usage);
    return -1;
  }
  if (strcmp(a->mode, "decode") != 0 && strcmp(a->mode, "prefill") != 0) {
    cli_error(sub, "--mode '%s' is not decode or prefill", a->mode);
    return -1;
  }
  if (strcmp(a->dtype, "bf16") != 0 && strcmp(a->dtype, "e4m3") != 0) {
    cli_error(sub, "--query-dtype '%s' is not bf16 or e4m3", a->dtype);
    return -1;
  }
  int prefill = !strcmp(a->mode, "prefill");
  if (prefill && (!a->cu || !a->ctx)) {
    cli_error(sub, "--mode prefill needs --cu-seqlens-q and --context-lens");
    return -1;
  }
  if (!prefill && (a->cu || a->ctx)) {
    cli_error(sub, "--cu-seqlens-q and --context-lens are for --mode prefill only");
    return -1;
  }
  if (prefill && a->have_query_len) {
    cli_error(sub, "--query-len is for --mode decode only (prefill rows come from --cu-seqlens-q)");
    return -1;
  }
  return 0;
}

int call_args_inputs(const struct call_args *a, const char **opts, const char **paths) {
  static const char *const names[] = {"--query", "--pages", "--block-table", "--seq-lens",
                                      "--cu-seqlens-q", "--context-lens"};
  const char *p[] = {a->query, a->pages, a->bt, a->seq_lens, a->cu, a->ctx};
  for (int i = 0; i < 6; i++) {
    opts[i] = names[i];
    paths[i] = p[i];
  }
  return 6;
}

static int fits_int32(int64_t v) { return v >= 0 && v <= INT32_MAX; }

/* The inputs' shapes agree, and every request's blocks fit the block table:
 * checked before anything is sized from the values, so bad input costs no
 * memory (the library checks the rest of SPEC section 11). */
static int check_shapes(const struct call_args *a, const char *sub, int prefill,
                        const struct npy_array *q, const struct npy_array *pages,
                        const struct npy_array *bt, const struct npy_array *sl,
                        const struct npy_array *cu, const struct npy_array *cl) {
  int64_t reqs = sl->shape[0];
  if (reqs < 1 || !fits_int32(reqs)) {
    cli_error(sub, "--seq-lens has %lld requests; it needs at least 1", (long long)reqs);
    return -1;
  }
  if (bt->shape[0] != reqs) {
    cli_error(sub, "--block-table has %lld rows, but --seq-lens has %lld requests",
              (long long)bt->shape[0], (long long)reqs);
    return -1;
  }
  if (bt->shape[1] < 1 || !fits_int32(bt->shape[1])) {
    cli_error(sub, "--block-table has %lld columns", (long long)bt->shape[1]);
    return -1;
  }
  if (pages->shape[1] != M3IDX_PAGE_BYTES || !fits_int32(pages->shape[0])) {
    cli_error(sub, "--pages has shape [%lld, %lld], expected [num_pages, %d]",
              (long long)pages->shape[0], (long long)pages->shape[1], M3IDX_PAGE_BYTES);
    return -1;
  }
  if (q->shape[2] != M3IDX_HEAD_DIM || q->shape[1] < 1 || !fits_int32(q->shape[0]) ||
      !fits_int32(q->shape[1]) || !fits_int32(q->shape[0] * q->shape[1])) {
    cli_error(sub, "--query has shape [%lld, %lld, %lld], expected [rows, heads >= 1, %d]",
              (long long)q->shape[0], (long long)q->shape[1], (long long)q->shape[2],
              M3IDX_HEAD_DIM);
    return -1;
  }
  if (prefill && (cu->shape[0] != reqs + 1 || cl->shape[0] != reqs)) {
    cli_error(sub, "--cu-seqlens-q has %lld entries and --context-lens %lld; "
              "%lld requests need %lld and %lld",
              (long long)cu->shape[0], (long long)cl->shape[0], (long long)reqs,
              (long long)reqs + 1, (long long)reqs);
    return -1;
  }
  if (!prefill && a->query_len >= 1 && q->shape[0] != reqs * (int64_t)a->query_len) {
    cli_error(sub, "--query has %lld rows, but %lld requests x --query-len %d need %lld",
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
      cli_error(sub, "--seq-lens[%lld] is %d: %lld blocks, more than the %lld columns "
                "of --block-table", (long long)r, (int)seq[r], (long long)blocks,
                (long long)bt->shape[1]);
      return -1;
    }
  }
  return 0;
}

int call_inputs_read(const struct call_args *a, const char *sub, struct call_inputs *in) {
  char err[1024];
  memset(in, 0, sizeof *in);
  in->prefill = !strcmp(a->mode, "prefill");
  int bf16 = !strcmp(a->dtype, "bf16");
#define READ(arr, path, opt, descr, nd)                                     \
  if (npy_read(path, opt, descr, nd, &arr, err, sizeof err) != 0) {         \
    cli_error(sub, "%s", err);                                              \
    return -1;                                                              \
  }
  READ(in->sl, a->seq_lens, "--seq-lens", "<i4", 1);
  READ(in->bt, a->bt, "--block-table", "<i4", 2);
  READ(in->pages, a->pages, "--pages", "|u1", 2);
  READ(in->q, a->query, "--query", bf16 ? "<u2" : "|u1", 3);
  if (in->prefill) {
    READ(in->cu, a->cu, "--cu-seqlens-q", "<i4", 1);
    READ(in->cl, a->ctx, "--context-lens", "<i4", 1);
  }
#undef READ
  if (check_shapes(a, sub, in->prefill, &in->q, &in->pages, &in->bt, &in->sl, &in->cu,
                   &in->cl) != 0)
    return -1;
  int64_t reqs = in->sl.shape[0];
  const int32_t *seq = in->sl.data;
  in->max_seq = 1;
  for (int64_t r = 0; r < reqs; r++)
    if (seq[r] > in->max_seq)
      in->max_seq = seq[r];
  in->rows = (int32_t)in->q.shape[0];
  in->heads = (int32_t)in->q.shape[1];
  /* ceil(max_seq / 128) without overflow: max_seq may be INT32_MAX. */
  in->width = in->max_seq / M3IDX_BLOCK_SIZE + (in->max_seq % M3IDX_BLOCK_SIZE != 0);
  in->batch = (m3idx_batch){
      .mode = in->prefill ? M3IDX_MODE_PREFILL : M3IDX_MODE_DECODE,
      .num_reqs = (int32_t)reqs, .num_heads = in->heads, .num_rows = in->rows,
      .max_seq_len = in->max_seq, .seq_lens = seq, .query_len = in->prefill ? 0 : a->query_len,
      .cu_seqlens_q = in->prefill ? in->cu.data : NULL,
      .context_lens = in->prefill ? in->cl.data : NULL};
  in->query = (m3idx_query){in->q.data, bf16 ? M3IDX_DTYPE_BF16 : M3IDX_DTYPE_E4M3, a->scale};
  in->kc = (m3idx_kcache){in->pages.data, (int32_t)in->pages.shape[0], in->bt.data,
                          (int32_t)in->bt.shape[1]};
  return 0;
}

int call_inputs_context(const struct call_args *a, const struct call_inputs *in,
                        const char *sub, m3idx_context **ctx) {
  m3idx_options o;
  m3idx_options_init(&o);
  o.backend = a->backend;
  o.threads = a->threads;
  o.max_reqs = in->batch.num_reqs;
  /* A call with no rows sizes nothing (m3idx_score_prefill(3)). */
  o.max_model_len = in->rows > 0 ? in->max_seq : 1;
  o.max_rows = in->rows > 0 ? in->rows : 1;
  o.max_heads = in->rows > 0 ? in->heads : 1;
  o.flags = M3IDX_FLAG_HOST_POINTERS;
  m3idx_status st = m3idx_context_create(&o, ctx);
  if (st == M3IDX_OK)
    return 0;
  cli_library_error(sub, st, m3idx_last_error(NULL));
  return st == M3IDX_ERR_BACKEND_UNAVAILABLE || st == M3IDX_ERR_NO_MEMORY ? CLI_EXIT_FAILURE
                                                                         : CLI_EXIT_USAGE;
}

void call_inputs_free(struct call_inputs *in) {
  npy_free(&in->q);
  npy_free(&in->pages);
  npy_free(&in->bt);
  npy_free(&in->sl);
  npy_free(&in->cu);
  npy_free(&in->cl);
}
