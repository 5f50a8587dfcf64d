/*
 * backend.h - the table every backend fills, and the checked call it gets.
 *
 * The front-end checks a call's arguments once (lib/checks.c), turns them
 * into a struct m3idx_call, and hands that to the context's backend.  The
 * HIP plugin includes this header too, so it stays plain C with fixed-size
 * fields, and the table carries its own ABI version.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_BACKEND_H
#define M3IDX_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "m3idx.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Raised whenever struct m3idx_call or struct m3idx_backend_ops change. */
#define M3IDX_BACKEND_ABI 4

/* What a stage is asked to do. */
enum m3idx_stage {
  M3IDX_STAGE_WORK_MAP = 1,
  M3IDX_STAGE_SCORE = 2,   /* decode or prefill, by batch mode */
  M3IDX_STAGE_PIN = 3,
  M3IDX_STAGE_TOPK = 4,
  M3IDX_STAGE_FUSED = 5,   /* score, pin, top-k */
  M3IDX_STAGE_BOUND = 6,   /* listed blocks' largest sum |q k| and sum |k| (verify) */
  M3IDX_STAGE_VERIFY = 7   /* the verdicts, where the memory is (verify) */
};

/* A checked call.  Every pointer is what the caller gave: host memory on
 * the CPU backend and with M3IDX_FLAG_HOST_POINTERS, device memory else. */
struct m3idx_call {
  enum m3idx_stage stage;
  m3idx_mode mode;
  int32_t num_reqs;
  int32_t num_heads;
  int32_t num_rows;
  int32_t max_seq_len;
  int32_t width;            /* ceil(max_seq_len / 128) */
  int32_t query_len;        /* decode */
  const int32_t *seq_lens;
  const int32_t *cu_seqlens_q; /* prefill */
  const int32_t *context_lens; /* prefill */

  const void *query;
  m3idx_dtype query_dtype;
  float scale;

  const uint8_t *pages;
  int32_t num_pages;
  const int32_t *block_table;
  int32_t bt_stride;

  int32_t init_blocks;
  int32_t local_blocks;

  const int32_t *work_map_in;  /* decode scoring: NULL = backend's own */
  int32_t *work_map_out;       /* M3IDX_STAGE_WORK_MAP */
  int32_t work_map_capacity;

  float *scores;               /* may be NULL for FUSED */
  const float *scores_in;      /* M3IDX_STAGE_TOPK */
  int64_t score_stride;        /* >= width */
  int32_t *topk;

  /* M3IDX_STAGE_BOUND, host memory on every backend: bound_count items
     {query row (row * num_heads + head), page id, causal keys}, each
     given its block's terms {A, K}, or for keys negated the block's floor
     (m3idx__verify_floor_terms; lib/verify-rules.h). */
  const int32_t *bound_items;
  int64_t bound_count;
  double *bound_terms;

  /* M3IDX_STAGE_VERIFY, for contexts whose memory the host cannot read:
     the call's inputs as for FUSED (scores and topk unused), the
     candidate's ids [pairs, 16] and scores (NULL, or at cand_stride) where
     the context reads memory, the checked options; verify_rows and
     verify_dev [pairs] (each row's largest deviation) are host memory,
     written only when the call succeeds. */
  const int32_t *candidate;
  const float *cand_scores;
  int64_t cand_stride;
  const m3idx_verify_options *verify_opts;
  m3idx_verify_row *verify_rows;
  double *verify_dev;
};

/* The detail of a failure, written by a backend. */
struct m3idx_errbuf {
  char msg[512];
};

/* Limits and placement a backend instance is created for. */
struct m3idx_backend_config {
  int32_t threads;
  int32_t device;
  void *stream;
  int32_t max_reqs;
  int32_t max_model_len;
  int32_t max_rows;
  int32_t max_heads;
  uint32_t flags;
};

struct m3idx_backend_ops {
  uint32_t abi;          /* M3IDX_BACKEND_ABI */
  const char *name;      /* "cpu", "hip" */
  /* NULL when usable here, else a sentence; must not allocate per call. */
  const char *(*unavailable_reason)(void);
  m3idx_status (*create)(const struct m3idx_backend_config *config,
                         void **state, struct m3idx_errbuf *err);
  void (*destroy)(void *state);
  m3idx_status (*run)(void *state, const struct m3idx_call *call,
                      struct m3idx_errbuf *err);
  m3idx_status (*synchronize)(void *state, struct m3idx_errbuf *err);
};

/* The built-in CPU reference (lib-cpu). */
extern const struct m3idx_backend_ops m3idx_cpu_backend_ops;

/* The symbol the HIP plugin exports; returns its table. */
#define M3IDX_PLUGIN_ENTRY "m3idx_plugin_backend_ops"

#ifdef __cplusplus
}
#endif
#endif /* M3IDX_BACKEND_H */
