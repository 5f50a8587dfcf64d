/*
 * context.c - options, creating a context on a backend, destroying it.
 *
 * SPDX-License-Identifier: MIT
 */
#include <config.h>

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "context.h"
#include "spec-rules.h"

/* The sizes of m3idx_options that released versions shipped (0.1 and 0.2:
 * this one).  Any other size is refused before a byte past opts->size is
 * read: a garbage size must not make the library read past the struct. */
static const size_t known_option_sizes[] = {sizeof(m3idx_options)};
#define KNOWN_FLAGS (M3IDX_FLAG_HOST_POINTERS | M3IDX_FLAG_NO_NUMA)

void m3idx_options_init(m3idx_options *opts) {
  if (opts == NULL)
    return;
  memset(opts, 0, sizeof *opts);
  opts->size = sizeof *opts;
  opts->backend = M3IDX_BACKEND_AUTO;
  opts->max_reqs = 256;
  opts->max_model_len = 131072;
  opts->max_rows = 1024;
  opts->max_heads = 4;
}

static m3idx_status read_options(const m3idx_options *user, m3idx_options *o) {
  if (user == NULL)
    return m3idx__fail(NULL, M3IDX_ERR_NULL_POINTER, "opts is NULL");
  size_t known = 0;
  for (size_t i = 0; i < sizeof known_option_sizes / sizeof known_option_sizes[0]; i++)
    known |= user->size == known_option_sizes[i];
  if (!known)
    return m3idx__fail(NULL, M3IDX_ERR_OPTIONS,
                       "opts->size is %zu, not the size of any m3idx_options this m3idx %s "
                       "knows (%zu): call m3idx_options_init and build against this m3idx.h",
                       user->size, M3IDX_VERSION_STRING, sizeof(m3idx_options));
  m3idx_options_init(o);
  memcpy(o, user, sizeof *o);
  if (o->backend != M3IDX_BACKEND_AUTO && o->backend != M3IDX_BACKEND_CPU &&
      o->backend != M3IDX_BACKEND_HIP)
    return m3idx__fail(NULL, M3IDX_ERR_INVALID_ARGUMENT,
                       "opts->backend is %d, not AUTO (0), CPU (1) or HIP (2)",
                       (int)o->backend);
  if (o->threads < 0 || o->threads > M3IDX_MAX_THREADS)
    return m3idx__fail(NULL, M3IDX_ERR_INVALID_SIZE,
                       "opts->threads is %d, outside [0, M3IDX_MAX_THREADS %d]",
                       (int)o->threads, M3IDX_MAX_THREADS);
  if (o->device < 0)
    return m3idx__fail(NULL, M3IDX_ERR_INVALID_SIZE,
                       "opts->device is %d, negative", (int)o->device);
  if (o->max_reqs < 1 || o->max_model_len < 1 || o->max_rows < 1 ||
      o->max_heads < 1)
    return m3idx__fail(NULL, M3IDX_ERR_INVALID_SIZE,
                       "opts limits must be >= 1: max_reqs %d, max_model_len %d, max_rows %d, max_heads %d",
                       (int)o->max_reqs, (int)o->max_model_len,
                       (int)o->max_rows, (int)o->max_heads);
  /* Backends size scratch as max_rows x max_heads rows of the widest of
     128 elements and the block width, in 4-byte values: limits whose
     product could not be addressed are refused before any backend
     multiplies them. */
  int64_t rows_heads = (int64_t)o->max_rows * o->max_heads;
  int64_t row_values = m3idx__blocks_of(o->max_model_len);
  row_values = row_values > M3IDX_HEAD_DIM ? row_values : M3IDX_HEAD_DIM;
  if (rows_heads > PTRDIFF_MAX / 4 / row_values)
    return m3idx__fail(NULL, M3IDX_ERR_LIMIT,
                       "opts limits max_rows %d x max_heads %d x max_model_len %d need more "
                       "scratch than can be addressed",
                       (int)o->max_rows, (int)o->max_heads, (int)o->max_model_len);
  if (o->flags & ~KNOWN_FLAGS)
    return m3idx__fail(NULL, M3IDX_ERR_INVALID_ARGUMENT,
                       "opts->flags has unknown bits 0x%x",
                       (unsigned)(o->flags & ~KNOWN_FLAGS));
  return M3IDX_OK;
}

/* AUTO, resolved: M3IDX_BACKEND first, then HIP where usable, else CPU. */
static m3idx_status resolve_backend(m3idx_backend asked, m3idx_backend *out) {
  if (asked == M3IDX_BACKEND_AUTO) {
    const char *env = getenv("M3IDX_BACKEND");
    if (env != NULL && *env != '\0') {
      if (strcasecmp(env, "cpu") == 0)
        asked = M3IDX_BACKEND_CPU;
      else if (strcasecmp(env, "hip") == 0)
        asked = M3IDX_BACKEND_HIP;
      else if (strcasecmp(env, "auto") != 0)
        return m3idx__fail(NULL, M3IDX_ERR_INVALID_ARGUMENT,
                           "M3IDX_BACKEND is '%s', not cpu, hip or auto", env);
    }
  }
  if (asked == M3IDX_BACKEND_AUTO)
    asked = m3idx_backend_unavailable_reason(M3IDX_BACKEND_HIP) == NULL
                ? M3IDX_BACKEND_HIP
                : M3IDX_BACKEND_CPU;
  *out = asked;
  return M3IDX_OK;
}

m3idx_status m3idx_context_create(const m3idx_options *user,
                                  m3idx_context **out) {
  m3idx_options o;
  m3idx_backend backend = M3IDX_BACKEND_CPU;
  m3idx__clear_error(NULL);
  if (out == NULL)
    return m3idx__fail(NULL, M3IDX_ERR_NULL_POINTER, "ctx (the output) is NULL");
  *out = NULL;
  m3idx_status st = read_options(user, &o);
  if (st != M3IDX_OK)
    return st;
  st = resolve_backend(o.backend, &backend);
  if (st != M3IDX_OK)
    return st;
  const char *why = NULL;
  const struct m3idx_backend_ops *ops = m3idx__backend_ops(backend, &why);
  if (ops == NULL)
    return m3idx__fail(NULL, M3IDX_ERR_BACKEND_UNAVAILABLE,
                       "the %s backend is unavailable: %s",
                       backend == M3IDX_BACKEND_HIP ? "HIP" : "CPU", why);

  m3idx_context *ctx = calloc(1, sizeof *ctx);
  if (ctx == NULL)
    return m3idx__fail(NULL, M3IDX_ERR_NO_MEMORY, "no memory for a context");
  ctx->backend = backend;
  ctx->ops = ops;
  ctx->host_visible =
      backend == M3IDX_BACKEND_CPU || (o.flags & M3IDX_FLAG_HOST_POINTERS) != 0;
  ctx->config = (struct m3idx_backend_config){
      .threads = o.threads,
      .device = o.device,
      .stream = o.stream,
      .max_reqs = o.max_reqs,
      .max_model_len = o.max_model_len,
      .max_rows = o.max_rows,
      .max_heads = o.max_heads,
      .flags = o.flags,
  };
  struct m3idx_errbuf err;
  err.msg[0] = '\0';
  st = ops->create(&ctx->config, &ctx->state, &err);
  if (st != M3IDX_OK) {
    free(ctx);
    return m3idx__fail(NULL, st, "%s backend: %s", ops->name,
                       err.msg[0] ? err.msg : m3idx_strerror(st));
  }
  *out = ctx;
  return M3IDX_OK;
}

void m3idx_context_destroy(m3idx_context *ctx) {
  if (ctx == NULL)
    return;
  ctx->ops->destroy(ctx->state);
  free(ctx);
}

m3idx_backend m3idx_context_backend(const m3idx_context *ctx) {
  return ctx ? ctx->backend : M3IDX_BACKEND_AUTO;
}
