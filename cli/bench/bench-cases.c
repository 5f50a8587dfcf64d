/*
 * bench-cases.c - the bench's cases, one row each.  A new case is a new
 * row; the runner builds its data, runs it on the backends its flags name
 * and samples its bytes where they say.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <stdio.h>

#include "bench.h"

#define C BENCH_CPU
#define CQ (BENCH_CPU | BENCH_CPU_QUICK)
#define G BENCH_GPU
#define GQ (BENCH_GPU | BENCH_GPU_QUICK)
#define SC BENCH_SAMPLE_CPU
#define SG BENCH_SAMPLE_GPU

/* Decode: n requests of about L tokens, q rows each, h heads. */
#define DECODE(n, L, q, h, flags, seed) {BENCH_DECODE, n, L, q, h, 0, 0, flags, seed, SYNTH_RANDOM_BYTES}
/* The same over pages of one style (SYNTH_MODEL_LIKE, SYNTH_HOSTILE_BYTES). */
#define PAGES(style, n, L, flags, seed) {BENCH_DECODE, n, L, 1, 1, 0, 0, flags, seed, style}
/* Prefill: one request of R rows after C tokens of context. */
#define PREFILL(R, C, flags, seed) {BENCH_PREFILL, 1, C, 0, 1, R, 0, flags, seed, SYNTH_RANDOM_BYTES}
/* The same with one pair in 20 past fp64's span (SYNTH_WIDE_ROWS). */
#define WIDE_PREFILL(R, C, flags, seed) {BENCH_PREFILL, 1, C, 0, 1, R, 0, flags, seed, SYNTH_WIDE_ROWS}
/* Top-k alone: 64 rows of B blocks of scores. */
#define TOPK(B, flags, seed) {BENCH_TOPK, 64, (B) * 128, 1, 1, 0, 0, flags, seed, SYNTH_SCORES}
/* Decode 8 x 128K q1 h1 on T threads (0: the run's). */
#define SCALING(T, flags) {BENCH_DECODE, 8, 131072, 1, 1, 0, T, CQ | SC | BENCH_SCALING | (flags), 1234, SYNTH_RANDOM_BYTES}

#define K8 8192
#define K128 131072
#define M1 1048576
#define GOLDEN 0x9e3779b97f4a7c15ull

const struct bench_case bench_cases[] = {
    DECODE(1, K8, 1, 1, CQ | G | SG, 77),     DECODE(1, K8, 1, 4, C | G | SG, 77),
    DECODE(1, K8, 4, 1, C | G | SG, 77),      DECODE(1, K8, 4, 4, C | G | SG, 77),
    DECODE(1, K128, 1, 1, C | G | SG, 78),    DECODE(1, K128, 1, 4, C | G | SG, 78),
    DECODE(1, K128, 4, 1, C | G | SG, 78),    DECODE(1, K128, 4, 4, C | G | SG, 78),
    DECODE(1, M1, 1, 1, C | GQ | SG, 79),     DECODE(1, M1, 1, 4, C | G | SG, 79),
    DECODE(1, M1, 4, 1, C | G | SG, 79),      DECODE(1, M1, 4, 4, C | G | SG, 79),
    DECODE(8, K8, 1, 1, C | G | SG, 80),      DECODE(8, K8, 1, 4, C | G | SG, 80),
    DECODE(8, K8, 4, 1, C | G | SG, 80),      DECODE(8, K8, 4, 4, C | G | SG, 80),
    DECODE(8, K128, 1, 1, CQ | GQ | SC | SG | BENCH_VERIFY, 81),
    DECODE(8, K128, 1, 4, CQ | GQ | SG, 81),  DECODE(8, K128, 4, 1, CQ | GQ | SG, 81),
    DECODE(8, K128, 4, 4, CQ | GQ | SG | BENCH_VERIFY, 81),
    DECODE(8, M1, 1, 1, C | G | SG, 82),           DECODE(8, M1, 1, 4, C | G | SG, 82),
    DECODE(8, M1, 4, 1, C | G | SG, 82),           DECODE(8, M1, 4, 4, C | G | SG, 82),
    DECODE(64, K8, 1, 1, CQ | G | SG, 83),    DECODE(64, K8, 1, 4, C | G | SG, 83),
    DECODE(64, K8, 4, 1, C | G | SG, 83),     DECODE(64, K8, 4, 4, C | G | SG, 83),
    DECODE(64, K128, 1, 1, C | GQ | SG, 84),       DECODE(64, K128, 1, 4, C | G | SG, 84),
    DECODE(64, K128, 4, 1, C | G | SG, 84),        DECODE(64, K128, 4, 4, C | G | SG, 84),
    DECODE(64, M1, 1, 1, C | G | SG, 85),          DECODE(64, M1, 1, 4, C | G | SG, 85),
    DECODE(64, M1, 4, 1, C | G | SG, 85),          DECODE(64, M1, 4, 4, C | G | SG, 85),

    /* The cost of the pages themselves: keys encoded from normal values
       against every byte random (most keys' scale spread past fp64, so
       they take the exact path). */
    PAGES(SYNTH_MODEL_LIKE, 8, K128, CQ | GQ | SC | SG | BENCH_VERIFY, 86),
    PAGES(SYNTH_HOSTILE_BYTES, 8, K128, CQ | GQ | SC | SG, 86),

    /* --quick runs the CPU's prefill with 512 rows. */
    PREFILL(512, 0, BENCH_CPU_QUICK | SC, 500),
    PREFILL(4096, 0, C | G | SC | SG, 500),
    PREFILL(512, 32768, BENCH_CPU_QUICK | BENCH_VERIFY, 501),
    PREFILL(4096, 32768, C | GQ | SG | BENCH_VERIFY, 501),
    /* The cost of rows whose candidates take the exact path: against the
       case above (the same seed, pages and rows but for 5% of them). */
    WIDE_PREFILL(4096, 32768, C | G | SG, 501),
    PREFILL(4096, K128, C | G | SG, 502),
    PREFILL(16384, 0, C | G | SG, 503),
    PREFILL(16384, 32768, C | G | SG, 504),
    PREFILL(16384, K128, C | G | SG, 505),

    TOPK(1024, CQ | GQ | SG, GOLDEN * 1),
    TOPK(8192, CQ | GQ | SG, GOLDEN * 2),
    TOPK(65536, C | G | SG, GOLDEN * 3),

    SCALING(1, 0),
    SCALING(2, 0),
    SCALING(0, 0),
    SCALING(0, BENCH_NUMA_OFF),
};
const size_t bench_ncases = sizeof bench_cases / sizeof bench_cases[0];

void bench_case_name(const struct bench_case *c, int threads, char *out, size_t n) {
  if (c->flags & BENCH_SCALING) {
    int t = c->threads ? c->threads : threads;
    snprintf(out, n, "scaling decode %dx%dK %d thread%s%s", (int)c->reqs,
             (int)(c->tokens / 1024), t, t == 1 ? "" : "s",
             c->flags & BENCH_NUMA_OFF ? " numa off" : "");
  } else if (c->stage == BENCH_DECODE && c->pages != SYNTH_RANDOM_BYTES) {
    snprintf(out, n, "pages %s %dx%dK q1 h1",
             c->pages == SYNTH_MODEL_LIKE ? "model-like" : "hostile", (int)c->reqs,
             (int)(c->tokens / 1024));
  } else if (c->stage == BENCH_DECODE) {
    snprintf(out, n, "decode %dx%dK q%d h%d", (int)c->reqs, (int)(c->tokens / 1024),
             (int)c->query_len, (int)c->heads);
  } else if (c->stage == BENCH_PREFILL) {
    snprintf(out, n, "prefill %d rows ctx %dK h%d%s", (int)c->rows, (int)(c->tokens / 1024),
             (int)c->heads, c->pages == SYNTH_WIDE_ROWS ? " wide" : "");
  } else {
    snprintf(out, n, "topk %d rows x %dK blocks", (int)(c->reqs * c->query_len),
             (int)(synth_blocks_of(c->tokens) / 1024));
  }
}
