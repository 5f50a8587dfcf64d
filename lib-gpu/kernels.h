/*
 * kernels.h - what the HIP kernels are given, and their launchers.
 *
 * Every pointer is device memory.  Kernels check the contents they read
 * (lengths, page ids, work-map entries) before using them, never read out
 * of bounds, and record bad input as bits in *err, which
 * m3idx_synchronize reports.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_GPU_KERNELS_H
#define M3IDX_GPU_KERNELS_H

#include <stdint.h>

#include "gpu-runtime.h"

/* Bits of the device error word. */
#define M3IDX_GPU_BAD_SEQ_LENS 0x1u     /* seq_lens / query_len / max_seq_len */
#define M3IDX_GPU_BAD_PREFILL 0x2u      /* cu_seqlens_q / context_lens */
#define M3IDX_GPU_BAD_PAGE_ID 0x4u      /* block_table entry outside [0, num_pages) */
#define M3IDX_GPU_BAD_WORK_MAP 0x8u     /* an entry not of this batch */
#define M3IDX_GPU_MAP_TOO_SMALL 0x10u   /* work_map_capacity too small */

struct gpu_call {
  int mode;          /* 1 decode, 2 prefill */
  int num_reqs, num_heads, num_rows, max_seq_len, width, query_len;
  const int32_t *seq_lens, *cu_seqlens_q, *context_lens;
  const void *query;
  int dtype;         /* 1 bf16, 2 e4m3 */
  float scale;
  const uint8_t *pages;
  int num_pages;
  const int32_t *block_table;
  int bt_stride;
  int init_blocks, local_blocks;
  float *scores;
  long long stride;
  unsigned *err;
  int one_grid;      /* the most blocks a decode scoring launch takes */
};

hipError_t m3idx_gpu_work_map(const struct gpu_call *c, int32_t *map, int capacity,
                              int chunk, hipStream_t s);
/* Decode scoring over the work map; prefill scoring (score-fp64.hip). */
hipError_t m3idx_gpu_score_decode(const struct gpu_call *c, const int32_t *map,
                                  int capacity, hipStream_t s);
hipError_t m3idx_gpu_score_prefill(const struct gpu_call *c, hipStream_t s);
/* Once per device: *grid receives the most blocks a decode launch takes
 * (twice what stays resident), for gpu_call.one_grid; fixed for a
 * context, so that graph replays see one grid. */
hipError_t m3idx_gpu_score_decode_setup(int *grid);

/* Tests only (devtools inject_device_failure): the device calls switch to
 * a device ordinal that does not exist. */
extern int m3idx_gpu_inject_bad_device;
/* Pin (pin != 0) and/or select (topk != NULL): scores_in is read, and
 * pinned scores are written to c->scores when write_pinned. */
hipError_t m3idx_gpu_pin_topk(const struct gpu_call *c, const float *scores_in,
                              int pin, int write_pinned, int32_t *topk, hipStream_t s);

#endif /* M3IDX_GPU_KERNELS_H */
