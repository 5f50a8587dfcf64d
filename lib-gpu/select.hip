/*
 * select.hip - the pin/top-k kernel: one block of threads per (row,
 * head), each selecting its pair (select-row.h).
 *
 * SPDX-License-Identifier: MIT
 */
#include "launch-after.h"
#include "select-row.h"

__global__ void __launch_bounds__(SELECT_THREADS)
pin_topk_kernel(gpu_call c, const float *scores_in, int pin, int write_pinned, int32_t *topk) {
  __shared__ select_smem sm;
  prior_grids_wait();
  if (threadIdx.x == 0) {
    int pos, req;
    sm.n = row_blocks(c, blockIdx.x, &pos, &req);
  }
  __syncthreads();
  select_row(sm, c, sm.n, blockIdx.x, blockIdx.y, scores_in, pin, write_pinned, topk);
}

hipError_t m3idx_gpu_pin_topk(const gpu_call &c, const float *scores_in, int pin,
                              int write_pinned, int32_t *topk, hipStream_t s) {
  if (c.num_rows == 0)
    return hipSuccess;
  dim3 grid(c.num_rows, c.num_heads);
  return launch_after_prior(c.after_prior, pin_topk_kernel, grid, dim3(SELECT_THREADS), 0, s, c,
                            scores_in, pin, write_pinned, topk);
}
