/*
 * hip-backend.hip - the HIP backend's table: device checks, scratch sized
 * once at create time, the stages launched on the context's stream, and
 * staging of host buffers for contexts made with M3IDX_FLAG_HOST_POINTERS.
 *
 * With device pointers a call only launches kernels on the stream: nothing
 * is allocated and nothing waits, so calls can be captured in a graph.
 * Bad input that lives in device memory is reported by m3idx_synchronize.
 *
 * SPDX-License-Identifier: MIT
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "buffer-plan.h"
#include "kernel-pick.h"
#include "stage-plan.h"
#include "work-map.h"

#ifndef M3IDX_HIP_ARCHS
#define M3IDX_HIP_ARCHS ""
#endif

#define EXPORT extern "C" __attribute__((visibility("default")))

struct hip_state {
  struct m3idx_backend_config cfg;
  hipStream_t stream;
  int host_pointers;
  int32_t max_width;
  unsigned *d_err;      /* the device error word */
  float *d_scores;      /* fused calls without a scores output */
  int32_t *d_map;       /* decode calls without a work map */
  int32_t map_capacity;
  gpu_kernels kernels;  /* the scoring kernels it runs (kernel-pick.hip) */
  bool after_prior;     /* the select kernel launches after_prior (launch-after.h) */
  void *stage;          /* host-pointer mode: device copies of the buffers */
  size_t stage_bytes;
  void *verify;         /* verification's device buffers (grown, kept) */
  size_t verify_bytes;
  void *verify_host;    /* the verdicts' pinned host buffer, which the kernel writes */
  void *verify_host_dev; /* the same as the device addresses it */
  size_t verify_host_bytes;
};

int m3idx_gpu_inject_bad_device = 0;

/* Keep the caller's current device: switch for the call (status says
 * whether that worked), then switch back. */
struct device_guard {
  int saved = -1;
  hipError_t status = hipSuccess;
  explicit device_guard(int device) {
    if (hipGetDevice(&saved) != hipSuccess)
      saved = -1;
    if (m3idx_gpu_inject_bad_device)
      device = 1 << 20;
    if (saved != device)
      status = hipSetDevice(device);
  }
  ~device_guard() {
    int now = -1;
    if (saved >= 0 && hipGetDevice(&now) == hipSuccess && now != saved)
      (void)hipSetDevice(saved); /* nothing can report it: the call's status is out */
    /* A failure here or in the call is reported; leave no sticky error for
       the caller's next runtime call to mistake for its own. */
    (void)hipGetLastError();
  }
};

/* Fail the call when the guard could not make its device current. */
#define GUARD_OR_FAIL(g)                                                    \
  do {                                                                      \
    if ((g).status != hipSuccess)                                           \
      return hip_failed(err, "hipSetDevice", (g).status);                   \
  } while (0)

static m3idx_status hip_failed(struct m3idx_errbuf *err, const char *what, hipError_t e) {
  snprintf(err->msg, sizeof err->msg, "%s: %s", what, hipGetErrorString(e));
  return M3IDX_ERR_DEVICE;
}

#define HIP_TRY(call, what)                                                 \
  do {                                                                      \
    hipError_t e_ = (call);                                                 \
    if (e_ != hipSuccess)                                                   \
      return hip_failed(err, what, e_);                                     \
  } while (0)

/* The target name of a device ("gfx950", "sm_90"). */
static void device_arch(const hipDeviceProp_t &p, char *out, size_t n) {
#if defined(M3IDX_HIP_PLATFORM_NVIDIA)
  snprintf(out, n, "sm_%d%d", p.major, p.minor);
#else
  snprintf(out, n, "%s", p.gcnArchName);
  char *colon = strchr(out, ':');
  if (colon)
    *colon = '\0';
#endif
}

static int arch_built(const char *arch) {
  const char *list = M3IDX_HIP_ARCHS;
  size_t n = strlen(arch);
  for (const char *p = list; *p;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    if (len == n && strncmp(p, arch, n) == 0)
      return 1;
    p += len + (comma ? 1 : 0);
  }
  return 0;
}

/* NULL when `device' can run this plugin, else why not (in buf); arch
 * (if not NULL) receives its target name. */
static const char *device_problem(int device, char *buf, size_t n, char *arch_out = NULL) {
  int count = 0;
  hipError_t e = hipGetDeviceCount(&count);
  if (e != hipSuccess || count == 0) {
    snprintf(buf, n, "no GPU device found (%s)",
             e != hipSuccess ? hipGetErrorString(e) : "the runtime sees none");
    return buf;
  }
  if (device >= count) {
    snprintf(buf, n, "device %d does not exist (%d device%s)", device, count,
             count == 1 ? "" : "s");
    return buf;
  }
  hipDeviceProp_t p;
  e = hipGetDeviceProperties(&p, device);
  if (e != hipSuccess) {
    snprintf(buf, n, "cannot read the properties of device %d (%s)", device,
             hipGetErrorString(e));
    return buf;
  }
  char arch[64];
  device_arch(p, arch, sizeof arch);
  if (!arch_built(arch)) {
    snprintf(buf, n,
             "device %d is %s, but the plugin was built for %s (configure --with-hip-arch=%s)",
             device, arch, M3IDX_HIP_ARCHS, arch);
    return buf;
  }
  if (arch_out)
    snprintf(arch_out, 64, "%s", arch);
  return NULL;
}

static const char *hip_unavailable_reason(void) {
  static char buf[512];
  static int done;
  static const char *why;
  if (!done) {
    why = device_problem(0, buf, sizeof buf);
    done = 1;
  }
  return why;
}

static void hip_destroy(void *state) {
  hip_state *s = (hip_state *)state;
  if (s == NULL)
    return;
  device_guard g(s->cfg.device);
  /* Destroy cannot report: a failed free is dropped, and the guard clears
     the error it leaves. */
  (void)hipFree(s->d_err);
  (void)hipFree(s->d_scores);
  (void)hipFree(s->d_map);
  (void)hipFree(s->stage);
  (void)hipFree(s->verify);
  (void)hipHostFree(s->verify_host);
  free(s);
}

static m3idx_status hip_create(const struct m3idx_backend_config *cfg, void **state,
                               struct m3idx_errbuf *err) {
  char why[512], arch[64];
  if (device_problem(cfg->device, why, sizeof why, arch) != NULL) {
    snprintf(err->msg, sizeof err->msg, "%s", why);
    return M3IDX_ERR_BACKEND_UNAVAILABLE;
  }
  device_guard g(cfg->device);
  GUARD_OR_FAIL(g);
  hip_state *s = (hip_state *)calloc(1, sizeof *s);
  if (s == NULL)
    return M3IDX_ERR_NO_MEMORY;
  s->cfg = *cfg;
  s->stream = (hipStream_t)cfg->stream;
  s->host_pointers = (cfg->flags & M3IDX_FLAG_HOST_POINTERS) != 0;
  s->max_width = m3idx__blocks_of(cfg->max_model_len);
#if defined(M3IDX_HIP_PLATFORM_NVIDIA)
  /* Programmatic dependent launch: sm_90 and later. */
  s->after_prior = strncmp(arch, "sm_", 3) == 0 && atoi(arch + 3) >= 90;
#endif
  int rc = m3idx_gpu_pick_kernels(cfg->device, arch, &s->kernels, err->msg, sizeof err->msg);
  if (rc != M3IDX_OK) {
    hip_destroy(s);
    return (m3idx_status)rc;
  }
  /* The largest map any batch needs: the smallest chunk. */
  s->map_capacity = (int32_t)m3idx__work_map_capacity_of(cfg->max_reqs, s->max_width,
                                                         M3IDX_WORK_CHUNK_MIN);
  size_t score_bytes =
      (size_t)cfg->max_heads * (size_t)cfg->max_rows * (size_t)s->max_width * sizeof(float);
  hipError_t e;
  if ((e = hipMalloc((void **)&s->d_err, sizeof(unsigned))) != hipSuccess ||
      (e = hipMalloc((void **)&s->d_scores, score_bytes)) != hipSuccess ||
      (e = hipMalloc((void **)&s->d_map, (size_t)s->map_capacity * 2 * sizeof(int32_t))) !=
          hipSuccess) {
    snprintf(err->msg, sizeof err->msg,
             "device scratch for max_heads %d x max_rows %d x %d blocks: %s",
             (int)cfg->max_heads, (int)cfg->max_rows, (int)s->max_width, hipGetErrorString(e));
    hip_destroy(s);
    return e == hipErrorOutOfMemory ? M3IDX_ERR_NO_MEMORY : M3IDX_ERR_DEVICE;
  }
  if ((e = hipMemsetAsync(s->d_err, 0, sizeof(unsigned), s->stream)) != hipSuccess ||
      (e = hipStreamSynchronize(s->stream)) != hipSuccess) {
    snprintf(err->msg, sizeof err->msg, "clearing the device error word on the stream: %s",
             hipGetErrorString(e));
    hip_destroy(s);
    return M3IDX_ERR_DEVICE;
  }
  *state = s;
  return M3IDX_OK;
}

/* ---- launching ---------------------------------------------------------- */

/* Launch the stages of a call whose pointers are all device pointers. */
static m3idx_status launch(hip_state *s, const struct m3idx_call *c, struct m3idx_errbuf *err) {
  hipStream_t st = s->stream;
  int32_t chunk = m3idx__work_chunk_blocks(c->query_len > 0 ? c->query_len : 1, c->num_heads);
  gpu_call g = gpu_call_of(c, s->d_err);
  g.after_prior = s->after_prior;
  /* Each launch reports hipGetLastError: clear what was left before it, so
     an earlier failure (the caller's, say) is not taken for the launch's. */
  (void)hipGetLastError();
  switch (c->stage) {
  case M3IDX_STAGE_WORK_MAP:
    HIP_TRY(m3idx_gpu_work_map(g, c->work_map_out, c->work_map_capacity, chunk, st),
            "work map kernel");
    return M3IDX_OK;
  case M3IDX_STAGE_PIN:
    HIP_TRY(m3idx_gpu_pin_topk(g, g.scores, 1, 1, NULL, st), "pin kernel");
    return M3IDX_OK;
  case M3IDX_STAGE_TOPK:
    HIP_TRY(m3idx_gpu_pin_topk(g, c->scores_in, 0, 0, c->topk, st), "top-k kernel");
    return M3IDX_OK;
  case M3IDX_STAGE_SCORE:
  case M3IDX_STAGE_FUSED:
    break;
  case M3IDX_STAGE_BOUND: /* hip_run's own */
  case M3IDX_STAGE_VERIFY:
    return M3IDX_ERR_INVALID_ARGUMENT;
  }
  const int user_scores = g.scores != NULL;
  if (!user_scores) {
    g.scores = s->d_scores;
    g.score_stride = c->width;
  }
  const int32_t *map = c->work_map_in;
  int cap = c->work_map_capacity;
  if (c->mode == M3IDX_MODE_DECODE && map == NULL) {
    /* The context's own map, of a capacity fixed by its limits. */
    cap = (int32_t)m3idx__work_map_capacity_of(s->cfg.max_reqs, s->max_width, chunk);
    HIP_TRY(m3idx_gpu_work_map(g, s->d_map, cap, chunk, st), "work map kernel");
    map = s->d_map;
  }
  HIP_TRY(m3idx_gpu_score(g, s->kernels, map, cap, st),
          c->mode == M3IDX_MODE_DECODE ? "decode scoring kernel" : "prefill scoring kernel");
  if (c->stage == M3IDX_STAGE_FUSED)
    HIP_TRY(m3idx_gpu_pin_topk(g, g.scores, 1, user_scores, c->topk, st), "top-k kernel");
  return M3IDX_OK;
}

static m3idx_status error_bits(unsigned bits, struct m3idx_errbuf *err) {
  snprintf(err->msg, sizeof err->msg, "a kernel found invalid input in device memory:%s%s%s%s%s",
           bits & M3IDX_GPU_BAD_SEQ_LENS ? " seq_lens (query_len > seq_len or seq_len > max_seq_len);" : "",
           bits & M3IDX_GPU_BAD_PREFILL ? " cu_seqlens_q/context_lens/seq_lens disagree;" : "",
           bits & M3IDX_GPU_BAD_PAGE_ID ? " a block_table entry outside [0, num_pages);" : "",
           bits & M3IDX_GPU_BAD_WORK_MAP ? " a work-map entry not built for this batch;" : "",
           bits & M3IDX_GPU_MAP_TOO_SMALL ? " work_map_capacity too small;" : "");
  return M3IDX_ERR_DEVICE_INPUT;
}

/* Wait for the stream, then report (and clear) the device error word. */
static m3idx_status hip_synchronize(void *state, struct m3idx_errbuf *err) {
  hip_state *s = (hip_state *)state;
  device_guard g(s->cfg.device);
  GUARD_OR_FAIL(g);
  unsigned bits = 0;
  HIP_TRY(hipMemcpyAsync(&bits, s->d_err, sizeof bits, hipMemcpyDeviceToHost, s->stream),
          "reading the device error word");
  HIP_TRY(hipStreamSynchronize(s->stream), "hipStreamSynchronize");
  if (bits == 0)
    return M3IDX_OK;
  HIP_TRY(hipMemsetAsync(s->d_err, 0, sizeof(unsigned), s->stream), "clearing the error word");
  HIP_TRY(hipStreamSynchronize(s->stream), "hipStreamSynchronize");
  return error_bits(bits, err);
}

/* A device buffer of at least `bytes' (grown, kept for the next call). */
static m3idx_status grow(void **buf, size_t *have, size_t bytes, const char *what,
                         struct m3idx_errbuf *err) {
  if (bytes <= *have)
    return M3IDX_OK;
  hipError_t e = *buf ? hipFree(*buf) : hipSuccess;
  *buf = NULL;
  *have = 0;
  if (e == hipSuccess)
    e = hipMalloc(buf, bytes);
  if (e != hipSuccess) {
    snprintf(err->msg, sizeof err->msg, "%s (%zu bytes on the device): %s", what, bytes,
             hipGetErrorString(e));
    return e == hipErrorOutOfMemory ? M3IDX_ERR_NO_MEMORY : M3IDX_ERR_DEVICE;
  }
  *have = bytes;
  return M3IDX_OK;
}

/* Host-pointer mode: copy in, launch, wait, copy out (only on success, so
 * that a failed call leaves the caller's buffers as they were). */
static m3idx_status run_staged(hip_state *s, const struct m3idx_call *c, struct m3idx_errbuf *err) {
  const stage_plan plan = stage_plan_of(c);
  m3idx_status rc = grow(&s->stage, &s->stage_bytes, plan.used, "staging host buffers", err);
  if (rc != M3IDX_OK)
    return rc;
  struct m3idx_call dc;
  HIP_TRY(stage_in(c, plan, (char *)s->stage, s->stream, &dc), "copy to device");
  rc = launch(s, &dc, err);
  if (rc == M3IDX_OK)
    rc = hip_synchronize(s, err);
  if (rc != M3IDX_OK)
    return rc;
  HIP_TRY(stage_out(c, plan, (const char *)s->stage, s->stream), "copy to host");
  HIP_TRY(hipStreamSynchronize(s->stream), "hipStreamSynchronize");
  return M3IDX_OK;
}

/* ---- verification (m3idx_verify_topk): calls that wait for their results -- */

/* The listed blocks' bound terms: items up, the kernel, terms down. */
static m3idx_status run_bound(hip_state *s, const struct m3idx_call *c, struct m3idx_errbuf *err) {
  const size_t n = (size_t)c->bound_count;
  struct m3idx_call dc = *c;
  buffer_plan plan;
  const size_t o_items = plan.take(n * 3 * sizeof(int32_t));
  const size_t o_terms = plan.take(n * 2 * sizeof(double));
  const size_t o_q = s->host_pointers ? plan.take(stage_query_bytes(c)) : 0;
  const size_t o_pages = s->host_pointers ? plan.take((size_t)c->num_pages * M3IDX_PAGE_BYTES) : 0;
  m3idx_status rc = grow(&s->verify, &s->verify_bytes, plan.used, "verification's buffers", err);
  if (rc != M3IDX_OK)
    return rc;
  char *d = (char *)s->verify;
  hipStream_t st = s->stream;
  HIP_TRY(hipMemcpyAsync(d + o_items, c->bound_items, n * 3 * sizeof(int32_t),
                         hipMemcpyHostToDevice, st), "copy to device");
  if (s->host_pointers) {
    HIP_TRY(hipMemcpyAsync(d + o_q, c->query, stage_query_bytes(c), hipMemcpyHostToDevice, st),
            "copy to device");
    HIP_TRY(hipMemcpyAsync(d + o_pages, c->pages, (size_t)c->num_pages * M3IDX_PAGE_BYTES,
                           hipMemcpyHostToDevice, st), "copy to device");
    dc.query = d + o_q;
    dc.pages = (const uint8_t *)(d + o_pages);
  }
  (void)hipGetLastError();
  HIP_TRY(m3idx_gpu_bound_terms(gpu_call_of(&dc, s->d_err), (const int32_t *)(d + o_items), (long long)n,
                                (double *)(d + o_terms), st), "bound kernel");
  rc = hip_synchronize(s, err);
  if (rc != M3IDX_OK)
    return rc;
  HIP_TRY(hipMemcpyAsync(c->bound_terms, d + o_terms, n * 2 * sizeof(double),
                         hipMemcpyDeviceToHost, st), "copy to host");
  HIP_TRY(hipStreamSynchronize(st), "hipStreamSynchronize");
  return M3IDX_OK;
}

/* A pinned host buffer of at least `bytes' (grown, kept), and its device
 * address. */
static m3idx_status grow_host(void **buf, void **dev, size_t *have, size_t bytes,
                              struct m3idx_errbuf *err) {
  if (bytes <= *have)
    return M3IDX_OK;
  hipError_t e = *buf ? hipHostFree(*buf) : hipSuccess;
  *buf = *dev = NULL;
  *have = 0;
  if (e == hipSuccess)
    e = hipHostMalloc(buf, bytes, hipHostMallocDefault);
  if (e == hipSuccess)
    e = hipHostGetDevicePointer(dev, *buf, 0);
  if (e != hipSuccess) {
    snprintf(err->msg, sizeof err->msg, "%zu bytes of pinned host memory for the verdicts: %s",
             bytes, hipGetErrorString(e));
    return e == hipErrorOutOfMemory ? M3IDX_ERR_NO_MEMORY : M3IDX_ERR_DEVICE;
  }
  *have = bytes;
  return M3IDX_OK;
}

/* The verdicts on the device: the scores into scratch, then the verdict
 * kernel, which writes the rows and the error word as it saw it straight
 * into pinned host memory; one wait. */
static m3idx_status run_verify(hip_state *s, const struct m3idx_call *c,
                               struct m3idx_errbuf *err) {
  const size_t pairs = (size_t)c->num_heads * (size_t)c->num_rows;
  const size_t row_bytes = pairs * sizeof(m3idx_verify_row), dev_bytes = pairs * sizeof(double);
  const size_t err_bytes = (pairs * sizeof(unsigned) + 7) / 8 * 8;
  buffer_plan plan;
  const size_t o_topk = plan.take(pairs * M3IDX_TOPK * sizeof(int32_t));
  const size_t o_done = plan.take(pairs * (size_t)c->width);
  /* The largest deviation takes every block's terms, in one launch. */
  const int all_terms =
      c->cand_scores != NULL && !(c->verify_opts->flags & M3IDX_VERIFY_NO_MAX_DEVIATION);
  const size_t o_terms = all_terms ? plan.take(pairs * (size_t)c->width * 2 * sizeof(double)) : 0;
  m3idx_status rc = grow(&s->verify, &s->verify_bytes, plan.used, "verification's buffers", err);
  if (rc == M3IDX_OK)
    rc = grow_host(&s->verify_host, &s->verify_host_dev, &s->verify_host_bytes,
                   dev_bytes + row_bytes + err_bytes, err);
  if (rc != M3IDX_OK)
    return rc;
  char *d = (char *)s->verify, *host = (char *)s->verify_host;
  char *hd = (char *)s->verify_host_dev; /* deviations, rows, error words */
  struct m3idx_call dc = *c; /* the scores; the verdict kernel pins and selects */
  dc.stage = M3IDX_STAGE_SCORE;
  dc.scores = s->d_scores;
  dc.score_stride = c->width;
  rc = launch(s, &dc, err);
  if (rc != M3IDX_OK)
    return rc;
  hipError_t e = m3idx_gpu_verify_rows(
      gpu_call_of(&dc, s->d_err), s->d_scores, (int32_t *)(d + o_topk), c->candidate, c->cand_scores, c->cand_stride,
      c->verify_opts, (m3idx_verify_row *)(hd + dev_bytes), (double *)hd,
      (unsigned *)(hd + dev_bytes + row_bytes), (uint8_t *)(d + o_done),
      all_terms ? (double *)(d + o_terms) : NULL, s->stream);
  if (e == hipSuccess)
    e = hipStreamSynchronize(s->stream);
  if (e != hipSuccess)
    return hip_failed(err, "verifying on the device", e);
  unsigned bits = 0, seen;
  for (size_t i = 0; i < pairs; i++) {
    memcpy(&seen, host + dev_bytes + row_bytes + i * sizeof seen, sizeof seen);
    bits |= seen;
  }
  if (bits != 0) {
    rc = error_bits(bits, err);
    if (hipMemsetAsync(s->d_err, 0, sizeof(unsigned), s->stream) != hipSuccess ||
        hipStreamSynchronize(s->stream) != hipSuccess)
      snprintf(err->msg + strlen(err->msg), sizeof err->msg - strlen(err->msg),
               " (and clearing the device error word failed)");
    return rc;
  }
  memcpy(c->verify_dev, host, dev_bytes);
  memcpy(c->verify_rows, host + dev_bytes, row_bytes);
  return M3IDX_OK;
}

static m3idx_status hip_run(void *state, const struct m3idx_call *c, struct m3idx_errbuf *err) {
  hip_state *s = (hip_state *)state;
  device_guard guard(s->cfg.device);
  GUARD_OR_FAIL(guard);
  if (c->stage == M3IDX_STAGE_BOUND)
    return run_bound(s, c, err);
  if (s->host_pointers) /* the front-end verifies host memory itself */
    return c->stage == M3IDX_STAGE_VERIFY ? M3IDX_ERR_INVALID_ARGUMENT : run_staged(s, c, err);
  /* Keys and queries are read 16 bytes at a time. */
  if ((c->pages != NULL && ((uintptr_t)c->pages & 15u) != 0) ||
      (c->query != NULL && ((uintptr_t)c->query & 15u) != 0)) {
    snprintf(err->msg, sizeof err->msg,
             "kcache->pages (%p) and query->data (%p) must be 16-byte aligned on the HIP backend (hipMalloc gives 256)",
             (const void *)c->pages, c->query);
    return M3IDX_ERR_INVALID_ARGUMENT;
  }
  if (c->stage == M3IDX_STAGE_VERIFY)
    return run_verify(s, c, err);
  return launch(s, c, err);
}

static const struct m3idx_backend_ops hip_ops = {
    M3IDX_BACKEND_ABI, "hip", hip_unavailable_reason, hip_create, hip_destroy, hip_run,
    hip_synchronize,
};

EXPORT const struct m3idx_backend_ops *m3idx_plugin_backend_ops(void) { return &hip_ops; }
