/*
 * devtools.h - a second table the HIP plugin exports for m3idx's own tests
 * and benchmark (not part of the library's API, not installed): device
 * memory, streams, graph capture and replay, and the two ceilings the
 * benchmark measures.  Every function returns 0 on success, else a
 * negative number, and writes the runtime's message to err (if not NULL).
 * Like backend.h, it is the plugin's interface; the tools reach the table
 * through the library's loader (m3idx__plugin_devtools), never by opening
 * the plugin themselves.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_DEVTOOLS_H
#define M3IDX_DEVTOOLS_H

#include <stddef.h>

#include "m3idx.h"

#ifdef __cplusplus
extern "C" {
#endif

#define M3IDX_DEVTOOLS_ABI 5
#define M3IDX_DEVTOOLS_ENTRY "m3idx_plugin_devtools"

struct m3idx_devtools {
  int abi;
  int (*alloc)(void **p, size_t bytes, char *err, size_t n);
  int (*release)(void *p);
  /* Synchronous copies (host <-> device). */
  int (*to_device)(void *dst, const void *src, size_t bytes, char *err, size_t n);
  int (*to_host)(void *dst, const void *src, size_t bytes, char *err, size_t n);
  int (*fill)(void *p, int byte, size_t bytes, char *err, size_t n);
  int (*stream_create)(void **stream, char *err, size_t n);
  int (*stream_destroy)(void *stream);
  int (*stream_sync)(void *stream, char *err, size_t n);
  /* Asynchronous host-to-device copy on a stream (capturable). */
  int (*to_device_async)(void *dst, const void *src, size_t bytes, void *stream, char *err,
                         size_t n);
  int (*capture_begin)(void *stream, char *err, size_t n);
  int (*capture_end)(void *stream, void **graph, char *err, size_t n);
  int (*graph_launch)(void *graph, void *stream, char *err, size_t n);
  int (*graph_destroy)(void *graph);
  /* Seconds between two events recorded around fn(arg) on the stream. */
  int (*time_on_stream)(void *stream, int (*fn)(void *arg), void *arg, double *seconds,
                        char *err, size_t n);
  /* Device-to-device copy of bytes: bytes read + written per second. */
  int (*copy_bandwidth)(size_t bytes, int repeats, double *bytes_per_s, char *err, size_t n);
  /* A register-resident fp32 fma loop over the whole device: FLOP/s. */
  int (*fma_peak)(double *flops_per_s, char *err, size_t n);
  /* The device's name. */
  int (*device_name)(char *name, size_t len);
  /* Tests only: while on, the plugin's calls switch to a device ordinal that
   * does not exist, so that their first runtime call fails (and leaves the
   * runtime's sticky last error behind, as a real failure does). */
  int (*inject_device_failure)(int on);
  /* Tests only: while on, the scoring kernels' fast path reads every code
   * byte's nibbles swapped (a wrong nibble order), in the self-check at
   * context creation as in calls.  Each switch forgets the self-check's
   * verdicts, so the next context creation checks again. */
  int (*inject_broken_fast_path)(int on);
  /* The scoring path of device's contexts: 1 fast, 0 plain, -1 not yet
   * decided; why receives the fast path's name or why it is not used. */
  int (*scoring_path)(int device, char *why, size_t n);
  /* The name of row i of the scoring kernels' pick table (what
   * M3IDX_HIP_PATH takes), fastest first; NULL past the last (the plain
   * row). */
  const char *(*scoring_kernel)(int i);
  /* A kernel that only reads bytes (and keeps a sum it never stores
   * unless it is impossible): bytes read per second.  The copy above
   * understates what a reader such as the scoring kernels can reach. */
  int (*read_bandwidth)(size_t bytes, int repeats, double *bytes_per_s, char *err, size_t n);
};

/* The loaded HIP plugin's developer tools, checked (ABI, no NULL member);
 * NULL with *why set when the HIP backend or its tools cannot be had.
 * Exported for m3idx's bench and tests only, in the version node
 * M3IDX_PRIVATE (lib/libm3idx.map): no compatibility is promised. */
M3IDX_API const struct m3idx_devtools *m3idx__plugin_devtools(const char **why);

#ifdef __cplusplus
}
#endif
#endif /* M3IDX_DEVTOOLS_H */
