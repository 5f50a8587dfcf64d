/*
 * cpu.h - the CPU reference backend's state and its parts.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_CPU_H
#define M3IDX_CPU_H

#include <stdint.h>

#include "backend.h"

/* Rows one page-kernel call scores (its running maxima live on the stack). */
#define M3IDX_CPU_ROW_BATCH 64

/* One query row of a page-kernel call. */
struct m3idx_cpu_row {
  const float *q;  /* 128 decoded fp32 query elements */
  int32_t nkeys;   /* causal keys of this page for the row, 1..128 */
  int32_t unfused; /* some |q| > 2^125: q * e2m1 may overflow, so the sums
                      must round each product (no fma) */
  int32_t pairs;   /* every element 0 or of magnitude in [2^-100, 2^125]:
                      the sums may run two products an instruction (the
                      avx512bf16 kernel; see page-kernel-avx512.c) */
  float *out;      /* where the clamped block score goes */
};

/* What m3idx__cpu_decode_queries notes of each query row (query_flags). */
#define M3IDX_CPU_ROW_UNFUSED 1u
#define M3IDX_CPU_ROW_PAIRS 2u

/* Scores one page (one 128-token block) for up to M3IDX_CPU_ROW_BATCH rows:
 * *out = clamp(max over the row's first nkeys keys of the SPEC section 4
 * logit), NaN logits ignored, NaN when all are NaN.  `next' is the page the
 * caller scores after this one, or NULL: the kernel prefetches it while it
 * scores this one (a hint only; it is never read). */
typedef void (*m3idx_cpu_page_kernel)(const uint8_t *page, const uint8_t *next,
                                      const struct m3idx_cpu_row *rows,
                                      int nrows, float scale);

/* The running block maxima of a page-kernel call, one per row. */
struct m3idx_cpu_maxima {
  float best[M3IDX_CPU_ROW_BATCH];
  int any[M3IDX_CPU_ROW_BATCH]; /* some non-NaN logit seen */
};

/* Start: no logit seen; returns the most keys any row sees. */
static inline int m3idx__cpu_maxima_start(struct m3idx_cpu_maxima *m,
                                          const struct m3idx_cpu_row *rows, int nrows) {
  int kmax = 0;
  for (int r = 0; r < nrows; r++) {
    m->best[r] = 0.0f;
    m->any[r] = 0;
    if (rows[r].nkeys > kmax)
      kmax = rows[r].nkeys;
  }
  return kmax;
}

/* Take a non-NaN value (-0 already made +0) into row r's maximum. */
static inline void m3idx__cpu_maxima_take(struct m3idx_cpu_maxima *m, int r, float v) {
  if (!m->any[r] || v > m->best[r])
    m->best[r] = v;
  m->any[r] = 1;
}

/* Write each row's clamped block score; all-NaN blocks score 0x7fc00000. */
void m3idx__cpu_maxima_store(const struct m3idx_cpu_maxima *m,
                             const struct m3idx_cpu_row *rows, int nrows);

void m3idx__cpu_page_scores_scalar(const uint8_t *page, const uint8_t *next,
                                   const struct m3idx_cpu_row *rows, int nrows,
                                   float scale);
#if defined(__x86_64__) && defined(__GNUC__)
#define M3IDX_CPU_HAVE_AVX512 1
void m3idx__cpu_page_scores_avx512(const uint8_t *page, const uint8_t *next,
                                   const struct m3idx_cpu_row *rows, int nrows,
                                   float scale);
#if defined(M3IDX_HAVE_AVX512_BF16)
/* The avx512 kernel, with its one-row pages scored two products an
 * instruction (vdpbf16ps) for rows with `pairs' set. */
#define M3IDX_CPU_HAVE_AVX512_BF16 1
void m3idx__cpu_page_scores_avx512bf16(const uint8_t *page, const uint8_t *next,
                                       const struct m3idx_cpu_row *rows, int nrows,
                                       float scale);
#endif
#endif

/* The fastest kernel this processor runs, or the one M3IDX_CPU_ISA names
 * (scalar, avx512, avx512bf16); *name says which.  NULL if M3IDX_CPU_ISA asks for one
 * this processor lacks. */
m3idx_cpu_page_kernel m3idx__cpu_pick_kernel(const char **name,
                                             struct m3idx_errbuf *err);

struct m3idx_cpu_state {
  struct m3idx_backend_config config;
  int threads;                  /* worker threads of every parallel region */
  m3idx_cpu_page_kernel kernel;
  const char *kernel_name;
  int32_t max_width;            /* blocks of max_model_len */
  float *query_f32;             /* [max_rows * max_heads * 128] */
  uint8_t *query_flags;         /* [max_rows * max_heads] M3IDX_CPU_ROW_* */
  float *scores;                /* [max_heads * max_rows * max_width] */
  int32_t *row_pos;             /* [max_rows] position of each row */
  int32_t *map;                 /* [map_capacity * 2] own decode schedule */
  int32_t map_capacity;
  int64_t *prefix;              /* [max_reqs + 1] prefill work items */
  int numa;                     /* threads were placed with libnuma */
};

/* Stages (each runs its own parallel region). */
void m3idx__cpu_decode_queries(struct m3idx_cpu_state *s,
                               const struct m3idx_call *c);
void m3idx__cpu_row_positions(struct m3idx_cpu_state *s,
                              const struct m3idx_call *c);
void m3idx__cpu_score_decode(struct m3idx_cpu_state *s,
                             const struct m3idx_call *c, const int32_t *map,
                             float *scores, int64_t stride);
void m3idx__cpu_score_prefill(struct m3idx_cpu_state *s,
                              const struct m3idx_call *c, float *scores,
                              int64_t stride);
/* Pin (and, with topk != NULL, select) every (head, row): one pass. */
void m3idx__cpu_pin_topk(struct m3idx_cpu_state *s, const struct m3idx_call *c,
                         float *scores, int64_t stride, int pin,
                         const float *scores_in, int32_t *topk);

/* Per-row helpers. */
float m3idx__cpu_clamp(float score);
void m3idx__cpu_pin_row(float *row, int32_t n, int32_t init_blocks,
                        int32_t local_blocks);
void m3idx__cpu_topk_row(const float *row, int32_t n, int32_t *ids);

/* Placement of threads and first touch of scratch. */
int m3idx__cpu_place_threads(struct m3idx_cpu_state *s);
void m3idx__cpu_first_touch(struct m3idx_cpu_state *s, void *p, size_t bytes);

#endif /* M3IDX_CPU_H */
