/*
 * fake-plugin.c - a stand-in for m3idx-hip.so that check-loader points the
 * library's loader at: M3IDX_FAKE_PLUGIN picks what its tables get wrong
 * (a NULL member, another ABI, no developer tools), or "fine" for tables
 * that are right and a backend that says it has no device.
 *
 * SPDX-License-Identifier: MIT
 */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "devtools.h"

static const char *mode(void) {
  const char *m = getenv("M3IDX_FAKE_PLUGIN");
  return m ? m : "fine";
}

static const char *no_device(void) { return "fake plugin: no device here"; }
static const char *usable(void) { return NULL; }
static m3idx_status create(const struct m3idx_backend_config *c, void **s,
                           struct m3idx_errbuf *e) {
  (void)c;
  (void)s;
  (void)e;
  return M3IDX_ERR_BACKEND_UNAVAILABLE;
}
static void destroy(void *s) { (void)s; }
static m3idx_status run(void *s, const struct m3idx_call *c, struct m3idx_errbuf *e) {
  (void)s;
  (void)c;
  (void)e;
  return M3IDX_ERR_BACKEND_UNAVAILABLE;
}
static m3idx_status sync_(void *s, struct m3idx_errbuf *e) {
  (void)s;
  (void)e;
  return M3IDX_OK;
}

const struct m3idx_backend_ops *m3idx_plugin_backend_ops(void);
const struct m3idx_backend_ops *m3idx_plugin_backend_ops(void) {
  static struct m3idx_backend_ops ops;
  ops = (struct m3idx_backend_ops){M3IDX_BACKEND_ABI, "hip", no_device, create, destroy, run,
                                   sync_};
  if (strcmp(mode(), "null-run") == 0)
    ops.run = NULL;
  if (strcmp(mode(), "bad-abi") == 0)
    ops.abi = M3IDX_BACKEND_ABI + 100;
  if (strcmp(mode(), "no-devtools") == 0 || strcmp(mode(), "null-devtools-member") == 0 ||
      strcmp(mode(), "usable") == 0)
    ops.unavailable_reason = usable;
  return &ops;
}

static void never_called(void) { abort(); }

const struct m3idx_devtools *m3idx_plugin_devtools(void);
const struct m3idx_devtools *m3idx_plugin_devtools(void) {
  static struct m3idx_devtools dt;
  if (strcmp(mode(), "no-devtools") == 0)
    return NULL;
  /* Every member set (the loader checks that none is NULL); none is called. */
#define SET(m) dt.m = (__typeof__(dt.m))never_called
  dt.abi = M3IDX_DEVTOOLS_ABI;
  SET(alloc), SET(release), SET(to_device), SET(to_host), SET(fill), SET(stream_create);
  SET(stream_destroy), SET(stream_sync), SET(to_device_async), SET(capture_begin);
  SET(capture_end), SET(graph_launch), SET(graph_destroy), SET(time_on_stream);
  SET(copy_bandwidth), SET(fma_peak), SET(device_name), SET(inject_device_failure);
  SET(inject_broken_fast_path), SET(scoring_path), SET(scoring_kernel), SET(read_bandwidth);
#undef SET
  if (strcmp(mode(), "null-devtools-member") == 0)
    dt.fill = NULL;
  return &dt;
}
