/*
 * worker-threads.c - how many OpenMP workers a CPU context may use.
 *
 * libgomp ends the process when it cannot start a thread, and its threads
 * do not survive fork().  So the count is bounded, the threads are tried
 * with pthreads (libgomp's stack size) before OpenMP is asked for them,
 * and a child forked after the workers started computes on one thread.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "omp-compat.h"

static int workers_started; /* some context of this process started workers */
static volatile int in_forked_child; /* forked after that: libgomp is unusable */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void after_fork_in_child(void) {
  if (__atomic_load_n(&workers_started, __ATOMIC_RELAXED))
    in_forked_child = 1;
}

static void register_atfork(void) { pthread_atfork(NULL, NULL, after_fork_in_child); }

int m3idx__cpu_team(const struct m3idx_cpu_state *s) { return in_forked_child ? 1 : s->threads; }

/* CPUs this process may run on (its affinity mask), at least 1. */
static int usable_cpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
    return CPU_COUNT(&set);
  return 1;
}

/* libgomp's worker stack size: GOMP_STACKSIZE or OMP_STACKSIZE (a number
 * with an optional B, K, M or G; K when none), else 0 (the default). */
static size_t omp_stack_size(void) {
  const char *v = getenv("GOMP_STACKSIZE");
  if (v == NULL || *v == '\0')
    v = getenv("OMP_STACKSIZE");
  if (v == NULL || *v == '\0')
    return 0;
  char *end;
  errno = 0;
  unsigned long long n = strtoull(v, &end, 10);
  while (*end == ' ')
    end++;
  int shift = 10;
  switch (*end) {
  case 'b': case 'B': shift = 0; break;
  case 'k': case 'K': case '\0': shift = 10; break;
  case 'm': case 'M': shift = 20; break;
  case 'g': case 'G': shift = 30; break;
  default: return 0; /* libgomp ignores what it cannot parse, too */
  }
  if (errno || n > (SIZE_MAX >> shift))
    return 0;
  return (size_t)n << shift;
}

struct probe {
  pthread_mutex_t lock;
  pthread_cond_t released_cond;
  int released;
};

static void *hold(void *arg) {
  struct probe *p = arg;
  pthread_mutex_lock(&p->lock);
  while (!p->released)
    pthread_cond_wait(&p->released_cond, &p->lock);
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

/* Start `extra' threads at once and let them go; how many started. */
static int try_threads(int extra, int *why) {
  struct probe p = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
  pthread_t *ids = malloc((size_t)extra * sizeof *ids);
  pthread_attr_t attr;
  int started = 0;
  *why = ENOMEM;
  if (ids == NULL || pthread_attr_init(&attr) != 0) {
    free(ids);
    return 0;
  }
  size_t stack = omp_stack_size();
  if (stack != 0 && pthread_attr_setstacksize(&attr, stack) != 0)
    stack = 0;
  for (; started < extra; started++) {
    int rc = pthread_create(&ids[started], &attr, hold, &p);
    if (rc != 0) {
      *why = rc;
      break;
    }
  }
  pthread_mutex_lock(&p.lock);
  p.released = 1;
  pthread_cond_broadcast(&p.released_cond);
  pthread_mutex_unlock(&p.lock);
  for (int i = 0; i < started; i++)
    pthread_join(ids[i], NULL);
  pthread_attr_destroy(&attr);
  free(ids);
  return started;
}

m3idx_status m3idx__cpu_threads_resolve(int32_t asked, int *out,
                                        struct m3idx_errbuf *err) {
  pthread_once(&atfork_once, register_atfork);
  if (in_forked_child) {
    *out = 1;
    return M3IDX_OK;
  }
  int n = asked;
  if (n == 0) {
    n = omp_get_max_threads();
    int cpus = usable_cpus();
    n = n < 1 ? 1 : n > cpus ? cpus : n;
  }
  if (n > M3IDX_MAX_THREADS)
    n = M3IDX_MAX_THREADS;
#ifdef _OPENMP
  if (n > 1) {
    int why = 0, got = try_threads(n - 1, &why);
    if (got < n - 1) {
      if (asked != 0) {
        snprintf(err->msg, sizeof err->msg,
                 "cannot start %d worker threads (only %d started: %s): lower opts->threads",
                 (int)asked, got + 1, strerror(why));
        return M3IDX_ERR_NO_MEMORY;
      }
      n = got + 1; /* the default takes what the machine holds */
    }
  }
#else
  n = 1;
#endif
  if (n > 1)
    __atomic_store_n(&workers_started, 1, __ATOMIC_RELAXED);
  *out = n;
  return M3IDX_OK;
}
