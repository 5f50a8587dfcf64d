/*
 * status.c - status sentences and the per-context / per-thread messages.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "context.h"

static _Thread_local struct m3idx_errbuf thread_err;

const char *m3idx_strerror(m3idx_status status) {
  switch (status) {
  case M3IDX_OK: return "success";
  case M3IDX_ERR_NULL_POINTER: return "a required pointer is NULL";
  case M3IDX_ERR_INVALID_SIZE: return "a count or length is negative or out of range";
  case M3IDX_ERR_INCONSISTENT: return "lengths that must agree do not";
  case M3IDX_ERR_PAGE_ID: return "a block-table entry is outside [0, num_pages)";
  case M3IDX_ERR_FORCED_BLOCKS: return "init/local block counts are negative or exceed the top-k";
  case M3IDX_ERR_SCALE: return "the score scale is not finite";
  case M3IDX_ERR_UNSUPPORTED: return "the configuration is not supported";
  case M3IDX_ERR_BACKEND_UNAVAILABLE: return "the backend cannot be used here";
  case M3IDX_ERR_LIMIT: return "the call exceeds the context's limits";
  case M3IDX_ERR_NO_MEMORY: return "out of memory";
  case M3IDX_ERR_WORK_MAP: return "the work map is too small or was not built for this batch";
  case M3IDX_ERR_OPTIONS: return "the options struct is invalid";
  case M3IDX_ERR_DEVICE: return "the GPU runtime reported an error";
  case M3IDX_ERR_DEVICE_INPUT: return "a GPU kernel found invalid input in device memory";
  case M3IDX_ERR_INVALID_ARGUMENT: return "an enumeration or flag value is not valid";
  }
  return "unknown m3idx status";
}

static void vset(struct m3idx_errbuf *err, const char *fmt, va_list ap) {
  vsnprintf(err->msg, sizeof err->msg, fmt, ap);
}

m3idx_status m3idx__fail(m3idx_context *ctx, m3idx_status status,
                         const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vset(ctx ? &ctx->err : &thread_err, fmt, ap);
  va_end(ap);
  return status;
}

void m3idx__clear_error(m3idx_context *ctx) {
  if (ctx)
    ctx->err.msg[0] = '\0';
  else
    thread_err.msg[0] = '\0';
}

m3idx_status m3idx__backend_failed(m3idx_context *ctx, m3idx_status status,
                                   const struct m3idx_errbuf *err) {
  if (status == M3IDX_OK)
    return status;
  if (err->msg[0] == '\0')
    return m3idx__fail(ctx, status, "%s backend: %s", ctx->ops->name,
                       m3idx_strerror(status));
  if (&ctx->err != err)
    memcpy(&ctx->err, err, sizeof *err);
  return status;
}

const char *m3idx_last_error(const m3idx_context *ctx) {
  return ctx ? ctx->err.msg : thread_err.msg;
}
