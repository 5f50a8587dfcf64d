/*
 * context.h - what an m3idx_context holds, and how calls report errors.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef M3IDX_CONTEXT_H
#define M3IDX_CONTEXT_H

#include "backend.h"

struct m3idx_context {
  m3idx_backend backend;                 /* CPU or HIP */
  const struct m3idx_backend_ops *ops;
  void *state;                           /* the backend's instance */
  struct m3idx_backend_config config;    /* limits it was created for */
  int host_visible;                      /* the library may read the caller's buffers */
  struct m3idx_errbuf err;               /* m3idx_last_error(ctx) */
};

/* Record a failure: on ctx, or (ctx == NULL) in the calling thread's
 * buffer that m3idx_last_error(NULL) returns.  Returns status. */
m3idx_status m3idx__fail(m3idx_context *ctx, m3idx_status status,
                         const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Clear the message before a call starts. */
void m3idx__clear_error(m3idx_context *ctx);

/* Copy a backend's message into ctx; returns status. */
m3idx_status m3idx__backend_failed(m3idx_context *ctx, m3idx_status status,
                                   const struct m3idx_errbuf *err);

/* Find a backend's table: the built-in CPU one, or the HIP plugin (loaded
 * once, with dlopen).  NULL with *why set when it cannot be had. */
const struct m3idx_backend_ops *m3idx__backend_ops(m3idx_backend backend,
                                                   const char **why);

#endif /* M3IDX_CONTEXT_H */
