/*
 * omp-compat.h - OpenMP's run-time calls, or their one-thread stand-ins
 * when the compiler has no OpenMP (the pragmas are then ignored).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_OMP_COMPAT_H
#define M3IDX_OMP_COMPAT_H

#ifdef _OPENMP
#include <omp.h>
#else
static inline int omp_get_max_threads(void) { return 1; }
static inline int omp_get_thread_num(void) { return 0; }
static inline int omp_get_num_threads(void) { return 1; }
#endif

#endif /* M3IDX_OMP_COMPAT_H */
