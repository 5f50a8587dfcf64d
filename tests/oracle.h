/*
 * oracle.h - an independent scalar oracle of SPEC sections 2-7, for the
 * tests only.  It shares no code with the library: element formats are
 * decoded from their definitions with ldexpf, each logit's exact sum is a
 * GMP integer rounded by hand, the top-k is a full sort.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_TEST_ORACLE_H
#define M3IDX_TEST_ORACLE_H

#include <stdint.h>

/* A whole call, in host memory. */
struct oracle_call {
  int mode;               /* 1 decode, 2 prefill */
  int num_reqs, num_heads, num_rows, max_seq_len, query_len;
  const int32_t *seq_lens, *cu_seqlens_q, *context_lens;
  const void *query;      /* [rows, H, 128] */
  int dtype;              /* 1 bf16, 2 e4m3 */
  float scale;
  const uint8_t *pages;
  const int32_t *block_table;
  int bt_stride;
  int init_blocks, local_blocks;
};

float oracle_bf16(uint16_t x);
float oracle_e4m3(uint8_t x);
float oracle_e2m1(unsigned code);
float oracle_e8m0(unsigned e);

int oracle_width(const struct oracle_call *c);
/* Position of a row, and its causal block count. */
int oracle_row_pos(const struct oracle_call *c, int row);
int oracle_row_blocks(const struct oracle_call *c, int row);

/* The logit of one (head, row) against token p of request r. */
float oracle_logit(const struct oracle_call *c, int h, int row, int r, int p);

/* Clamped, unpinned block scores [H, rows, stride] (causal entries only). */
void oracle_scores(const struct oracle_call *c, float *scores, int64_t stride);
/* Clamp and pin in place. */
void oracle_pin(const struct oracle_call *c, float *scores, int64_t stride);
/* Top-k [H, rows, 16] of the given scores. */
void oracle_topk(const struct oracle_call *c, const float *scores,
                 int64_t stride, int32_t *topk);

#endif
