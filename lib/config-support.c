/*
 * config-support.c - the one indexer configuration m3idx computes.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <string.h>

#include "m3idx.h"

const char *m3idx_config_unsupported_reason(int32_t topk, int32_t block_size,
                                            int32_t head_dim,
                                            const char *score_type) {
  if (topk != M3IDX_TOPK)
    return "top-k must be 16: the selection and its output layout are built for 16 blocks per row";
  if (block_size != M3IDX_BLOCK_SIZE)
    return "block size must be 128 tokens: one MXFP4 page is one sparse key block of 128 tokens";
  if (head_dim != M3IDX_HEAD_DIM)
    return "head dim must be 128: a page slot holds 128 e2m1 elements in four 32-element scale groups";
  if (score_type == NULL)
    return "score type is NULL: the only score type is \"max\"";
  if (strcmp(score_type, "max") != 0)
    return "score type must be \"max\": a block scores the maximum logit over its causal keys";
  return NULL;
}
