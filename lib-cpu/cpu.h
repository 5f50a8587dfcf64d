/*
 * cpu.h - the CPU reference backend's state and its parts.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_CPU_H
#define M3IDX_CPU_H

#include <stdint.h>

#include "backend.h"
#include "spec-rules.h"

/* Rows one page-kernel call scores (its running maxima live on the stack). */
#define M3IDX_CPU_ROW_BATCH 64

/* Residual elements a cut row may have and still give the exact D of the
 * keys that pass the filter from its integer sums (row-digits.c). */
#define M3IDX_CPU_CUT_RESIDUALS 16

/* A row cut for the vnni kernel's filter (row-digits.c): its elements as
 * integers Q of at most 15 bits, q * 2^(13 - Hq) truncated (Hq: the
 * exponent of its largest element), negated for a negative scale, in two
 * signed 8-bit digit planes (Q = 256 * hi + lo).  Laid out as the kernel
 * reads a key tile: in lo[2c + h] and hi[2c + h], dword lane 4p + k holds,
 * in byte b, the digit of element 8(4p + c) + 2b + h (the elements that
 * dword 4p + c of a key holds in its low (h 0) or high (h 1) nibbles), the
 * same for each k; bias lane 4p + k holds group p's bias.  p and bias_p:
 * the one-plane cut P (lib/filter-cut.h), laid out as lo.  The same digits
 * in a key's own order (one_lo[h] and one_hi[h], lane l: elements 8l + 2b
 * + h) and the elements whose Q is not exact (residuals) give the exact D
 * of one key (lib/filter-cut.h). */
struct m3idx_cpu_digits {
  _Alignas(64) int32_t lo[8][16];
  _Alignas(64) int32_t hi[8][16];
  _Alignas(64) int32_t bias[16]; /* 12 * the sum of each group's Q (the codes' bias) */
  _Alignas(64) int32_t p[8][16];
  _Alignas(64) int32_t bias_p[16]; /* 12 * the sum of each group's P */
  _Alignas(64) int32_t one_lo[2][16];
  _Alignas(64) int32_t one_hi[2][16];
  /* Residual i: its z - Q and its element (0 and 0 past the last). */
  _Alignas(64) double res_value[M3IDX_CPU_CUT_RESIDUALS];
  uint8_t res_element[M3IDX_CPU_CUT_RESIDUALS];
  int32_t residuals;             /* how many; -1: more than the arrays hold */
  int32_t hq, negate;            /* the cut's Hq, and whether it negated q */
  int32_t kind;                  /* M3IDX_CPU_ROW_* */
};
enum {
  M3IDX_CPU_ROW_FILTER, /* the digits above are set */
  M3IDX_CPU_ROW_ZERO,   /* every element is 0: every finite D is 0 */
  M3IDX_CPU_ROW_EXACT   /* a NaN or infinite element: no filter */
};

/* Cuts row q (128 elements) for a call of the given scale. */
void m3idx__cpu_cut_row(const float *q, float scale, struct m3idx_cpu_digits *out);

/* One query row of a page-kernel call. */
struct m3idx_cpu_row {
  const float *q;  /* 128 decoded fp32 query elements */
  const struct m3idx_cpu_digits *digits; /* the same row, cut */
  int32_t nkeys;   /* causal keys of this page for the row, 1..128 */
  int32_t spread;  /* the most key-scale spread for which fp64 sums of this
                      row are exact (m3idx__row_spread_allowed), -1: none */
  float *out;      /* where the clamped block score goes */
};

/* Scores one page (one 128-token block) for up to M3IDX_CPU_ROW_BATCH rows:
 * *out = clamp(max over the row's first nkeys keys of the SPEC section 4
 * logit), NaN logits ignored, NaN when all are NaN.  `ahead' is a page the
 * caller scores soon after this one (decode: two pages on), or NULL: the
 * kernel prefetches it while it scores this one (a hint only; never read). */
typedef void (*m3idx_cpu_page_kernel)(const uint8_t *page, const uint8_t *ahead,
                                      const struct m3idx_cpu_row *rows,
                                      int nrows, float scale);

/* The clamped block score of what a row kept: NaN when every causal
 * logit was NaN. */
float m3idx__cpu_best_score(const struct m3idx__block_best *b, float scale);

void m3idx__cpu_page_scores_scalar(const uint8_t *page, const uint8_t *ahead,
                                   const struct m3idx_cpu_row *rows, int nrows,
                                   float scale);
#if defined(__x86_64__) && defined(__GNUC__)
void m3idx__cpu_page_scores_vnni(const uint8_t *page, const uint8_t *ahead,
                                 const struct m3idx_cpu_row *rows, int nrows,
                                 float scale);
void m3idx__cpu_page_scores_vnni_vbmi(const uint8_t *page, const uint8_t *ahead,
                                      const struct m3idx_cpu_row *rows, int nrows,
                                      float scale);
#endif
void m3idx__cpu_page_scores_fp64(const uint8_t *page, const uint8_t *ahead,
                                 const struct m3idx_cpu_row *rows, int nrows,
                                 float scale);
#if defined(__x86_64__) && defined(__GNUC__)
#define M3IDX_CPU_HAVE_AVX512 1
void m3idx__cpu_page_scores_avx512(const uint8_t *page, const uint8_t *ahead,
                                   const struct m3idx_cpu_row *rows, int nrows,
                                   float scale);
#endif

/* The largest verification terms of `keys' keys (codes 64 bytes a key,
 * scales 4) for a row with a shift: the bits of the rule's
 * m3idx__verify_key_terms (lib/verify-rules.h). */
typedef void (*m3idx_cpu_terms_kernel)(const uint32_t *qi, int32_t s, const uint8_t *codes,
                                       const uint8_t *scales, int32_t keys, double *out);
void m3idx__cpu_block_terms_rule(const uint32_t *qi, int32_t s, const uint8_t *codes,
                                 const uint8_t *scales, int32_t keys, double *out);
/* m3idx__verify_floor_key from a block's scale bytes. */
typedef int32_t (*m3idx_cpu_floor_key)(const uint8_t *scales, int32_t keys);
int32_t m3idx__cpu_floor_key_rule(const uint8_t *scales, int32_t keys);
#ifdef M3IDX_CPU_HAVE_AVX512
void m3idx__cpu_block_terms_vnni(const uint32_t *qi, int32_t s, const uint8_t *codes,
                                 const uint8_t *scales, int32_t keys, double *out);
int32_t m3idx__cpu_floor_key_vnni(const uint8_t *scales, int32_t keys);
#endif

/* The fastest kernel this processor runs, or the one M3IDX_CPU_ISA names
 * (scalar, fp64, avx512, vnni, vnni-vbmi); *name says which, *terms and
 * *floor_key verification's kernels of the same instructions.  NULL if
 * M3IDX_CPU_ISA asks for one this processor lacks. */
m3idx_cpu_page_kernel m3idx__cpu_pick_kernel(const char **name, m3idx_cpu_terms_kernel *terms,
                                             m3idx_cpu_floor_key *floor_key,
                                             struct m3idx_errbuf *err);

struct m3idx_cpu_state {
  struct m3idx_backend_config config;
  int threads;                  /* worker threads of every parallel region */
  m3idx_cpu_page_kernel kernel;
  const char *kernel_name;
  m3idx_cpu_terms_kernel terms; /* verification's (bound.c) */
  m3idx_cpu_floor_key floor_key;
  int32_t max_width;            /* blocks of max_model_len */
  float *query_f32;             /* [max_rows * max_heads * 128] */
  int8_t *query_spread;         /* [max_rows * max_heads] m3idx__row_spread_allowed */
  struct m3idx_cpu_digits *query_digits; /* [max_rows * max_heads] */
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
/* Verification's bound terms of the call's listed blocks (bound.c). */
void m3idx__cpu_block_bounds(struct m3idx_cpu_state *s, const struct m3idx_call *c);

/* Pin (and, with topk != NULL, select) every (head, row): one pass. */
void m3idx__cpu_pin_topk(struct m3idx_cpu_state *s, const struct m3idx_call *c,
                         float *scores, int64_t stride, int pin,
                         const float *scores_in, int32_t *topk);

/* Per-row helpers. */
void m3idx__cpu_pin_row(float *row, int32_t n, int32_t init_blocks,
                        int32_t local_blocks);
void m3idx__cpu_topk_row(const float *row, int32_t n, int32_t *ids);

/* The worker count of a new context (asked: opts->threads, 0 = default):
 * bounded by M3IDX_MAX_THREADS, by the CPUs for the default, and by the
 * threads the machine can start; M3IDX_ERR_NO_MEMORY when an asked count
 * cannot start. */
m3idx_status m3idx__cpu_threads_resolve(int32_t asked, int *out,
                                        struct m3idx_errbuf *err);
/* The team of a parallel region: s->threads, or 1 in a child forked after
 * workers started (libgomp's threads are gone there). */
int m3idx__cpu_team(const struct m3idx_cpu_state *s);

/* Placement of threads and first touch of scratch. */
int m3idx__cpu_place_threads(struct m3idx_cpu_state *s);
void m3idx__cpu_first_touch(struct m3idx_cpu_state *s, void *p, size_t bytes);

#endif /* M3IDX_CPU_H */
