/*
 * backend-loader.c - finds a backend's table: the built-in CPU reference,
 * or the HIP plugin, opened here and nowhere else, once a process, so that
 * one installed library serves nodes with and without a GPU runtime.
 *
 * The plugin is $M3IDX_PLUGIN_DIR/m3idx-hip.so when that variable is set
 * and not empty, else m3idx-hip.so in the directory it was installed to
 * (m3idx(7)).  Its backend table and its optional developer-tools table
 * are checked (ABI, no NULL member) before anything is called through them.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "devtools.h"

#ifndef M3IDX_PLUGIN_DIR
#define M3IDX_PLUGIN_DIR "/usr/local/lib/m3idx"
#endif
#define PLUGIN_FILE "m3idx-hip.so"

static pthread_once_t hip_once = PTHREAD_ONCE_INIT;
static const struct m3idx_backend_ops *hip_ops;
static const struct m3idx_devtools *hip_devtools;
static char hip_why[4608];
static char devtools_why[4608];

/* The plugin's exported table, or NULL. */
static const void *entry_table(void *handle, const char *symbol) {
  void *sym = dlsym(handle, symbol);
  const void *(*entry)(void);
  memcpy(&entry, &sym, sizeof entry);
  return sym ? entry() : NULL;
}

/* The name of the backend table's first NULL function, or NULL. */
static const char *missing_backend_member(const struct m3idx_backend_ops *t) {
  return !t->name                 ? "name"
         : !t->unavailable_reason ? "unavailable_reason"
         : !t->create             ? "create"
         : !t->destroy            ? "destroy"
         : !t->run                ? "run"
         : !t->synchronize        ? "synchronize"
                                  : NULL;
}

static const char *missing_devtools_member(const struct m3idx_devtools *t) {
  const struct {
    const char *name;
    int set;
  } m[] = {{"alloc", !!t->alloc},
           {"release", !!t->release},
           {"to_device", !!t->to_device},
           {"to_host", !!t->to_host},
           {"fill", !!t->fill},
           {"stream_create", !!t->stream_create},
           {"stream_destroy", !!t->stream_destroy},
           {"stream_sync", !!t->stream_sync},
           {"to_device_async", !!t->to_device_async},
           {"capture_begin", !!t->capture_begin},
           {"capture_end", !!t->capture_end},
           {"graph_launch", !!t->graph_launch},
           {"graph_destroy", !!t->graph_destroy},
           {"time_on_stream", !!t->time_on_stream},
           {"copy_bandwidth", !!t->copy_bandwidth},
           {"fma_peak", !!t->fma_peak},
           {"device_name", !!t->device_name},
           {"inject_device_failure", !!t->inject_device_failure},
           {"inject_broken_fast_path", !!t->inject_broken_fast_path},
           {"scoring_path", !!t->scoring_path},
           {"scoring_kernel", !!t->scoring_kernel},
           {"read_bandwidth", !!t->read_bandwidth}};
  for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
    if (!m[i].set)
      return m[i].name;
  return NULL;
}

static void load_devtools(void *handle, const char *path) {
  const struct m3idx_devtools *dt = entry_table(handle, M3IDX_DEVTOOLS_ENTRY);
  const char *missing = dt && dt->abi == M3IDX_DEVTOOLS_ABI ? missing_devtools_member(dt) : NULL;
  if (dt == NULL)
    snprintf(devtools_why, sizeof devtools_why, "the HIP plugin %s has no developer tools", path);
  else if (dt->abi != M3IDX_DEVTOOLS_ABI)
    snprintf(devtools_why, sizeof devtools_why,
             "the HIP plugin %s has developer tools of ABI %d, expected %d: reinstall m3idx", path,
             dt->abi, M3IDX_DEVTOOLS_ABI);
  else if (missing)
    snprintf(devtools_why, sizeof devtools_why,
             "the HIP plugin %s has no '%s' among its developer tools: reinstall m3idx", path,
             missing);
  else
    hip_devtools = dt;
}

static void load_hip_plugin(void) {
  const char *dir = getenv("M3IDX_PLUGIN_DIR");
  char path[4096];
  if (dir == NULL || *dir == '\0')
    dir = M3IDX_PLUGIN_DIR;
  snprintf(path, sizeof path, "%s/%s", dir, PLUGIN_FILE);
  void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) {
    const char *e = dlerror();
#ifdef HAVE_HIP_PLUGIN
    snprintf(hip_why, sizeof hip_why, "the HIP plugin %s could not be loaded (%s)", path,
             e ? e : "unknown error");
#else
    snprintf(hip_why, sizeof hip_why,
             "this m3idx was built without the HIP backend (configure: %s), and no plugin "
             "is at %s (%s)",
             M3IDX_HIP_NOT_BUILT_WHY, path, e ? e : "unknown error");
#endif
    return;
  }
  const struct m3idx_backend_ops *ops = entry_table(handle, M3IDX_PLUGIN_ENTRY);
  const char *missing = ops && ops->abi == M3IDX_BACKEND_ABI ? missing_backend_member(ops) : NULL;
  if (ops == NULL || ops->abi != M3IDX_BACKEND_ABI || missing != NULL) {
    if (missing)
      snprintf(hip_why, sizeof hip_why,
               "the HIP plugin %s has no '%s' in its backend table: reinstall m3idx", path,
               missing);
    else
      snprintf(hip_why, sizeof hip_why,
               "the HIP plugin %s does not match this library (backend ABI %u, expected %u): "
               "reinstall m3idx",
               path, ops ? (unsigned)ops->abi : 0u, (unsigned)M3IDX_BACKEND_ABI);
    dlclose(handle);
    return;
  }
  /* The plugin stays loaded for the life of the process. */
  hip_ops = ops;
  const char *why = ops->unavailable_reason();
  if (why != NULL)
    snprintf(hip_why, sizeof hip_why, "%s", why);
  load_devtools(handle, path);
}

const struct m3idx_backend_ops *m3idx__backend_ops(m3idx_backend backend,
                                                   const char **why) {
  switch (backend) {
  case M3IDX_BACKEND_CPU:
    *why = NULL;
    return &m3idx_cpu_backend_ops;
  case M3IDX_BACKEND_HIP:
    pthread_once(&hip_once, load_hip_plugin);
    if (hip_why[0] != '\0') {
      *why = hip_why;
      return NULL;
    }
    *why = NULL;
    return hip_ops;
  case M3IDX_BACKEND_AUTO:
    break;
  }
  *why = "not a backend";
  return NULL;
}

const struct m3idx_devtools *m3idx__plugin_devtools(const char **why) {
  if (m3idx__backend_ops(M3IDX_BACKEND_HIP, why) == NULL)
    return NULL;
  *why = hip_devtools ? NULL : devtools_why;
  return hip_devtools;
}

const char *m3idx_backend_unavailable_reason(m3idx_backend backend) {
  const char *why = NULL;
  switch (backend) {
  case M3IDX_BACKEND_AUTO:
    return NULL; /* AUTO always has the CPU */
  case M3IDX_BACKEND_CPU:
  case M3IDX_BACKEND_HIP:
    (void)m3idx__backend_ops(backend, &why);
    return why;
  }
  return "not a backend: use M3IDX_BACKEND_AUTO, M3IDX_BACKEND_CPU or M3IDX_BACKEND_HIP";
}
