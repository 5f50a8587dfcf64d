/*
 * placement.c - where worker threads run and where scratch pages land.
 *
 * Scratch is first touched by the threads that later read it, in the
 * static schedule of the per-row stages, so on a NUMA machine its pages sit
 * on the node that reads them.  With libnuma (and more than one node), each
 * worker thread is also kept on one node.  Placement changes speed only,
 * never results.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <string.h>

#ifdef HAVE_LIBNUMA
#include <numa.h>
#endif

#include "cpu.h"
#include "omp-compat.h"

int m3idx__cpu_place_threads(struct m3idx_cpu_state *s) {
#ifdef HAVE_LIBNUMA
  if (s->config.flags & M3IDX_FLAG_NO_NUMA)
    return 0;
  if (numa_available() < 0 || numa_max_node() < 1)
    return 0;
  int nodes = numa_max_node() + 1;
#pragma omp parallel num_threads(m3idx__cpu_team(s))
  {
    int t = omp_get_thread_num(), n = omp_get_num_threads();
    /* Contiguous blocks of threads per node, as a static schedule splits work. */
    numa_run_on_node((int)((long)t * nodes / n));
    numa_set_localalloc();
  }
  return 1;
#else
  (void)s;
  return 0;
#endif
}

void m3idx__cpu_first_touch(struct m3idx_cpu_state *s, void *p, size_t bytes) {
  unsigned char *b = p;
  const size_t page = 4096;
  size_t pages = (bytes + page - 1) / page;
#pragma omp parallel for num_threads(m3idx__cpu_team(s)) schedule(static)
  for (size_t i = 0; i < pages; i++) {
    size_t len = bytes - i * page < page ? bytes - i * page : page;
    memset(b + i * page, 0, len);
  }
}
