/*
 * bulk-copy.h - a page into shared memory by one bulk copy (cp.async.bulk,
 * sm_90 and later), completed on an mbarrier: what a staged kernel
 * (score-staged.hip) uses to have the next page on its way while a warp
 * scores the current one.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_GPU_BULK_COPY_H
#define M3IDX_GPU_BULK_COPY_H

#include "device-math.h"

#if defined(M3IDX_HIP_PLATFORM_NVIDIA)

M3IDX_DEV uint32_t shared_address(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

/* One thread: the buffer's mbarrier expects one arrival, with bytes. */
M3IDX_DEV void barrier_init(uint64_t *bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" : : "r"(shared_address(bar)) : "memory");
}

/* One thread: the page into dst, bar completing when its bytes are in.
 * The fence orders the warp's earlier reads of dst (the generic proxy)
 * before the copy's writes (the async proxy). */
M3IDX_DEV void page_copy(uint8_t *dst, const uint8_t *src, uint64_t *bar) {
  asm volatile("fence.proxy.async.shared::cta;" : : : "memory");
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
               :
               : "r"(shared_address(bar)), "r"(M3IDX_PAGE_BYTES)
               : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1], %2, [%3];"
               :
               : "r"(shared_address(dst)), "l"(src), "r"(M3IDX_PAGE_BYTES),
                 "r"(shared_address(bar))
               : "memory");
}

/* Every lane: wait until bar's phase of the given parity has completed. */
M3IDX_DEV void page_wait(uint64_t *bar, uint32_t parity) {
  uint32_t done;
  do
    asm volatile("{ .reg .pred p;\n"
                 "  mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "  selp.u32 %0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(shared_address(bar)), "r"(parity)
                 : "memory");
  while (!done);
}

#endif /* M3IDX_HIP_PLATFORM_NVIDIA */

#endif /* M3IDX_GPU_BULK_COPY_H */
