/*
 * call-inputs.h - the inputs of one fused call as the commands that take
 * them (topk, verify) read them: the shared options, the .npy files, their
 * shapes checked before anything is sized, the batch and a context.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_CLI_CALL_INPUTS_H
#define M3IDX_CLI_CALL_INPUTS_H

#include <getopt.h>

#include "m3idx.h"
#include "npy.h"

struct call_args {
  const char *mode, *query, *dtype, *pages, *bt, *seq_lens, *cu, *ctx;
  int32_t query_len, init_blocks, local_blocks, threads;
  int have_query_len;
  float scale;
  m3idx_backend backend;
};

/* getopt_long ids of the shared options; a command's own start at
 * CALL_O_END. */
enum { CALL_O_MODE = 256, CALL_O_QUERY, CALL_O_DTYPE, CALL_O_PAGES, CALL_O_BT, CALL_O_SL,
       CALL_O_QLEN, CALL_O_CU, CALL_O_CTX, CALL_O_SCALE, CALL_O_INIT, CALL_O_LOCAL,
       CALL_O_BACKEND, CALL_O_THREADS, CALL_O_END };
#define CALL_OPTIONS                                                             \
  {"mode", required_argument, 0, CALL_O_MODE},                                   \
  {"query", required_argument, 0, CALL_O_QUERY},                                 \
  {"query-dtype", required_argument, 0, CALL_O_DTYPE},                           \
  {"pages", required_argument, 0, CALL_O_PAGES},                                 \
  {"block-table", required_argument, 0, CALL_O_BT},                              \
  {"seq-lens", required_argument, 0, CALL_O_SL},                                 \
  {"query-len", required_argument, 0, CALL_O_QLEN},                              \
  {"cu-seqlens-q", required_argument, 0, CALL_O_CU},                             \
  {"context-lens", required_argument, 0, CALL_O_CTX},                            \
  {"scale", required_argument, 0, CALL_O_SCALE},                                 \
  {"init-blocks", required_argument, 0, CALL_O_INIT},                            \
  {"local-blocks", required_argument, 0, CALL_O_LOCAL},                          \
  {"backend", required_argument, 0, CALL_O_BACKEND},                             \
  {"threads", required_argument, 0, CALL_O_THREADS}

void call_args_init(struct call_args *a);
/* Take option opt's value: 0, or -1 after saying why. */
int call_args_take(struct call_args *a, int opt, const char *arg, const char *sub);
/* The required options present and agreeing: 0, or -1 after saying why. */
int call_args_check(const struct call_args *a, const char *sub, const char *usage);
/* The input options and their paths (for out_check), 6 of them. */
int call_args_inputs(const struct call_args *a, const char **opts, const char **paths);

struct call_inputs {
  struct npy_array q, pages, bt, sl, cu, cl;
  int prefill;
  int32_t rows, heads, max_seq, width;
  m3idx_batch batch;
  m3idx_query query;
  m3idx_kcache kc;
};

/* Read the .npy inputs and check their shapes: 0, or -1 after saying why. */
int call_inputs_read(const struct call_args *a, const char *sub, struct call_inputs *in);
/* A context sized for the call (host pointers): 0, or the exit code after
 * saying why. */
int call_inputs_context(const struct call_args *a, const struct call_inputs *in,
                        const char *sub, m3idx_context **ctx);
void call_inputs_free(struct call_inputs *in);

#endif
