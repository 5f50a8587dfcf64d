/*
 * buffer-plan.h - several arrays in one device allocation: each take()
 * returns the next array's offset, 256-byte aligned, and used is the
 * allocation's size (host-pointer staging, the path self-check).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_GPU_BUFFER_PLAN_H
#define M3IDX_GPU_BUFFER_PLAN_H

#include <stddef.h>

struct buffer_plan {
  size_t used = 0;
  size_t take(size_t bytes) {
    const size_t at = used;
    used += (bytes + 255) / 256 * 256;
    return at;
  }
};

#endif /* M3IDX_GPU_BUFFER_PLAN_H */
