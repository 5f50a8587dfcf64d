/*
 * backends.c - the backend tables: the built-in CPU reference, and the HIP
 * plugin loaded once with dlopen so that one installed library serves
 * nodes with and without a GPU runtime.
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

#ifndef M3IDX_PLUGIN_DIR
#define M3IDX_PLUGIN_DIR "/usr/local/lib/m3idx"
#endif
#define PLUGIN_FILE "m3idx-hip.so"

static pthread_once_t hip_once = PTHREAD_ONCE_INIT;
static const struct m3idx_backend_ops *hip_ops;
static char hip_why[4608];

static void load_hip_plugin(void) {
  const char *dir = getenv("M3IDX_PLUGIN_DIR");
  char path[4096];
  if (dir == NULL || *dir == '\0')
    dir = M3IDX_PLUGIN_DIR;
  snprintf(path, sizeof path, "%s/%s", dir, PLUGIN_FILE);
  void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) {
    const char *e = dlerror();
    snprintf(hip_why, sizeof hip_why,
             "the HIP plugin %s could not be loaded (%s); this m3idx may have been built without HIP (configure --with-hip)",
             path, e ? e : "unknown error");
    return;
  }
  m3idx_plugin_entry_fn entry;
  void *sym = dlsym(handle, M3IDX_PLUGIN_ENTRY);
  memcpy(&entry, &sym, sizeof entry);
  const struct m3idx_backend_ops *ops = entry ? entry() : NULL;
  if (ops == NULL || ops->abi != M3IDX_BACKEND_ABI) {
    snprintf(hip_why, sizeof hip_why,
             "the HIP plugin %s does not match this library (backend ABI %u, expected %u): reinstall m3idx",
             path, ops ? (unsigned)ops->abi : 0u, (unsigned)M3IDX_BACKEND_ABI);
    dlclose(handle);
    return;
  }
  /* The plugin stays loaded for the life of the process. */
  hip_ops = ops;
  const char *why = ops->unavailable_reason();
  if (why != NULL)
    snprintf(hip_why, sizeof hip_why, "%s", why);
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
