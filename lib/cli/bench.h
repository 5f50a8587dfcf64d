/*
 * bench.h - what the parts of `m3idx bench' share: results, ceilings,
 * synthetic data, and the GPU side (through the plugin's devtools).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_CLI_BENCH_H
#define M3IDX_CLI_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "m3idx.h"

struct bench_result {
  char name[96];
  const char *backend;      /* "cpu", "hip" */
  double median_s;          /* one call */
  double keys_per_s;        /* (row, key) logits per second / rows: keys scored per second */
  double bytes_per_s;       /* page bytes read per second */
  double roofline_bytes_per_s;
  double roofline_ratio;
  double flops_per_s;       /* 2 * 128 per (row, head, key) */
  double peak_flops_per_s;
  double page_read_bytes_per_s; /* CPU: pages read in shuffled order, alone; 0 on the GPU */
  const char *verified;     /* "yes", "no", "-" */
};

/* CPU ceilings, measured in the same run. */
double bench_cpu_read_bandwidth(int threads, size_t bytes, int repeats);
double bench_cpu_page_read_bandwidth(int threads, size_t bytes, int repeats);
double bench_cpu_fma_peak(int threads);

/* Synthetic decode / prefill data: random page bytes (e8m0 scales around
 * 2^0), distinct pages per block, shuffled block tables, bf16 queries. */
struct bench_data {
  int32_t num_reqs, bt_stride, num_pages, max_seq_len, max_rows, max_heads;
  int32_t *seq_lens, *block_table, *cu_seqlens_q, *context_lens;
  uint8_t *pages;
  uint16_t *query;          /* [max_rows, max_heads, 128] */
  float *scores;            /* top-k cases: [rows, width] scores to rank */
};
int bench_data_make(struct bench_data *d, int32_t num_reqs, const int32_t *seq_lens,
                    int32_t max_rows, int32_t max_heads, uint64_t seed);
void bench_data_free(struct bench_data *d);

/* A large buffer, allocated as serving engines allocate their caches. */
void *bench_alloc_cache(size_t bytes);

/* The GPU side; all return 0 on success, or -1 with a message in err. */
struct bench_gpu;
struct bench_gpu *bench_gpu_open(char *err, size_t n);
void bench_gpu_close(struct bench_gpu *g);
const char *bench_gpu_name(struct bench_gpu *g);
int bench_gpu_ceilings(struct bench_gpu *g, double *copy_bps, double *fma_flops, char *err,
                       size_t n);
/* Upload d; then time `calls' back-to-back calls of the stage, `repeats'
 * times; medians per call in *decode_s (score) and *fused_s.  When
 * check_topk is not NULL, the fused top-k is copied back into it. */
enum bench_stage { BENCH_DECODE, BENCH_PREFILL, BENCH_TOPK };
int bench_gpu_run(struct bench_gpu *g, const struct bench_data *d, const m3idx_batch *batch,
                  enum bench_stage stage, int repeats, double *score_s, double *fused_s,
                  int32_t *check_topk, float *check_scores, char *err, size_t n);

#endif
