/*
 * bench.h - `m3idx bench' as data: a table of cases (bench-cases.c), one
 * runner (bench-run.c), one report (bench-report.c), and one engine per
 * backend (engine-cpu.c, engine-gpu.c) with the same operations.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_CLI_BENCH_H
#define M3IDX_CLI_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "m3idx.h"
#include "synth.h"

enum bench_stage { BENCH_DECODE, BENCH_PREFILL, BENCH_TOPK };

/* Where a case runs, and what is checked. */
enum {
  BENCH_CPU = 1 << 0,        /* on the CPU in a full run */
  BENCH_CPU_QUICK = 1 << 1,  /* ... and in --quick */
  BENCH_GPU = 1 << 2,
  BENCH_GPU_QUICK = 1 << 3,
  BENCH_SAMPLE_CPU = 1 << 4, /* the CPU's bytes against a 1-thread run */
  BENCH_SAMPLE_GPU = 1 << 5, /* the GPU's bytes against the CPU's */
  BENCH_SCALING = 1 << 6,    /* a CPU thread-scaling case (named by its threads) */
  BENCH_NUMA_OFF = 1 << 7,   /* the CPU without NUMA placement */
  BENCH_VERIFY = 1 << 8      /* also time m3idx_verify_topk of a near candidate */
};

/* One case: one row of the table. */
struct bench_case {
  enum bench_stage stage;
  int32_t reqs;      /* decode, top-k: requests */
  int32_t tokens;    /* decode: each request's length (a little less for some);
                        prefill: the context before the rows; top-k: blocks x 128 */
  int32_t query_len; /* decode, top-k: rows per request */
  int32_t heads;
  int32_t rows;      /* prefill: rows of the one request */
  int32_t threads;   /* CPU threads; 0: the run's */
  unsigned flags;
  uint64_t seed;     /* of the synthetic data */
  enum synth_style pages; /* decode, prefill: SYNTH_RANDOM_BYTES unless the case says */
};

extern const struct bench_case bench_cases[];
extern const size_t bench_ncases;

/* The case's name ("decode 8x128K q1 h1"); threads: the run's CPU threads. */
void bench_case_name(const struct bench_case *c, int threads, char *out, size_t n);

/* What a case's call is: its data and batch on one backend. */
struct bench_job {
  const struct synth *data;
  m3idx_batch batch;
  enum bench_stage stage;
  int threads;       /* CPU: 0 for the run's */
  uint32_t flags;    /* context flags (M3IDX_FLAG_NO_NUMA) */
};

/* The ceilings a backend's figures are set against. */
struct bench_ceilings {
  double bytes_per_s;      /* CPU: plain read (the roof); GPU: device copy (read + write) */
  double page_bytes_per_s; /* CPU: 8704-byte pages in shuffled order; GPU: a kernel that
                              only reads (the roof) */
  double flops_per_s;      /* fp32 FMA loop */
};

/* Seconds per call: the median of the repeats, and whether they spread too
 * widely for the median to be a figure. */
struct bench_timing {
  double median_s;
  int unsteady;
  double spread; /* slowest / fastest - 1 */
};

/* One call of a stage through the public API, as both engines make it:
 * host pointers on the CPU, device pointers on the GPU. */
struct bench_call {
  m3idx_context *ctx;
  m3idx_batch batch;
  enum bench_stage stage;
  m3idx_query q;
  m3idx_kcache k;
  const int32_t *map; /* decode: the work map, or NULL */
  int32_t cap;
  float *scores;
  int64_t stride;
  int32_t *topk;
  const int32_t *cand;       /* BENCH_VERIFY: the candidate's ids and scores */
  const float *cand_scores;
  m3idx_verify_summary *summary;
};
/* What bench_call_once runs. */
enum bench_mode {
  BENCH_SCORE_ONLY,
  BENCH_FUSED,
  BENCH_VERIFY_CALL,    /* ids and scores, verdicts only */
  BENCH_VERIFY_IDS,     /* ids alone */
  BENCH_VERIFY_MAX_DEV  /* ids and scores, and the largest deviation */
};
/* One call: the score stage, the fused call (top-k alone for BENCH_TOPK),
   or verifying the candidate (its ids and scores, or its ids alone)
   against the fused call's forced blocks. */
m3idx_status bench_call_once(const struct bench_call *c, enum bench_mode mode);
/* A near candidate from the fused outputs: the same ids, each score one
   fp32 ulp up or down (a seeded choice), as another exact-enough indexer
   would give; scores has rows * stride entries. */
void bench_near_candidate(float *scores, size_t count, uint64_t seed);
/* The timing of n repeats' seconds v (sorts v). */
void bench_timing_of(double *v, int n, struct bench_timing *out);

/* A backend as the bench drives it.  Every operation returns 0, or -1
 * with a message in err. */
struct bench_engine {
  const char *name; /* "cpu", "hip" */
  void *(*open)(int threads, char *err, size_t n);
  void (*close)(void *engine);
  const char *(*device)(void *engine);
  int (*ceilings)(void *engine, int quick, struct bench_ceilings *out, char *err, size_t n);
  void *(*setup)(void *engine, const struct bench_job *job, char *err, size_t n);
  /* Time the mode's call. */
  int (*time)(void *job, enum bench_mode mode, int repeats, struct bench_timing *out, char *err,
              size_t n);
  /* Give the job the candidate verify calls check (host arrays, copied)
     and where their summary goes. */
  int (*set_candidate)(void *job, const int32_t *ids, const float *scores,
                       m3idx_verify_summary *summary, char *err, size_t n);
  /* Run the fused stage once (top-k alone for BENCH_TOPK) and expose its
     outputs in host memory: scores [H, rows, width] (NULL for BENCH_TOPK)
     and top-k [H, rows, 16]. */
  int (*outputs)(void *job, const float **scores, const int32_t **topk, char *err, size_t n);
  void (*teardown)(void *job);
};

extern const struct bench_engine bench_engine_cpu;
extern const struct bench_engine bench_engine_gpu;

/* One figure of the report. */
struct bench_result {
  char name[96];
  const char *backend;      /* "cpu", "hip" */
  double median_s;          /* one call */
  double keys_per_s;        /* keys scored per second (top-k: scores ranked) */
  double bytes_per_s;       /* page bytes read per second */
  double roofline_bytes_per_s;
  double roofline_ratio;
  double flops_per_s;       /* 2 * 128 per (row, head, key) */
  double peak_flops_per_s;
  double page_read_bytes_per_s; /* CPU: pages read in shuffled order, alone; 0 on the GPU */
  const char *verified;     /* "yes", "NO", "-" */
  double spread;            /* of the repeats: slowest / fastest - 1 */
  const char *unreliable;   /* NULL, or why the figure is not one to quote */
  double of_fused;          /* a verify line: its median over the fused call's */
};

struct bench_report {
  struct bench_result *results;
  int count, capacity;
  struct bench_ceilings ceilings[2];  /* [cpu, gpu], the higher of two measurements */
  double ceiling_moved[2];            /* higher / lower of the two - 1 */
  char device[2][256];                /* "" where the backend did not run */
  int cpu_threads;
};

struct bench_opts {
  int quick, json, want_cpu, want_hip, threads, repeats;
  const char *only; /* --case: the cases whose name contains this */
};

/* Run the cases the options ask for; 0, or CLI exit status. */
int bench_run(const struct bench_opts *o, struct bench_report *rep);

struct bench_result *bench_report_add(struct bench_report *rep);
void bench_report_print(const struct bench_report *rep, int json);
void bench_report_free(struct bench_report *rep);

/* CPU ceilings (ceilings-cpu.c). */
double bench_cpu_read_bandwidth(int threads, size_t bytes, int repeats);
double bench_cpu_page_read_bandwidth(int threads, size_t bytes, int repeats);
double bench_cpu_fma_peak(int threads);

#endif
