/*
 * devtools.hip - the plugin's tools for m3idx's tests and benchmark
 * (devtools.h): device memory, streams, graphs, and the copy-bandwidth
 * and fma-peak ceilings.
 *
 * SPDX-License-Identifier: MIT
 */
#include <stdio.h>

#include "devtools.h"
#include "gpu-runtime.h"
#include "kernel-pick.h"

#if defined(M3IDX_HIP_PLATFORM_NVIDIA)
typedef cudaGraph_t graph_t;
typedef cudaGraphExec_t graph_exec_t;
#define BEGIN_CAPTURE(s) cudaStreamBeginCapture((s), cudaStreamCaptureModeRelaxed)
#define END_CAPTURE cudaStreamEndCapture
#define INSTANTIATE(e, g) cudaGraphInstantiate((e), (g), 0)
#define GRAPH_LAUNCH cudaGraphLaunch
#define GRAPH_EXEC_DESTROY cudaGraphExecDestroy
#define GRAPH_DESTROY cudaGraphDestroy
#else
typedef hipGraph_t graph_t;
typedef hipGraphExec_t graph_exec_t;
#define BEGIN_CAPTURE(s) hipStreamBeginCapture((s), hipStreamCaptureModeRelaxed)
#define END_CAPTURE hipStreamEndCapture
#define INSTANTIATE(e, g) hipGraphInstantiate((e), (g), nullptr, nullptr, 0)
#define GRAPH_LAUNCH hipGraphLaunch
#define GRAPH_EXEC_DESTROY hipGraphExecDestroy
#define GRAPH_DESTROY hipGraphDestroy
#endif

#define EXPORT extern "C" __attribute__((visibility("default")))

static int check(hipError_t e, const char *what, char *err, size_t n) {
  if (e == hipSuccess)
    return 0;
  if (err)
    snprintf(err, n, "%s: %s", what, hipGetErrorString(e));
  return -1;
}

static int dt_alloc(void **p, size_t bytes, char *err, size_t n) {
  return check(hipMalloc(p, bytes ? bytes : 1), "hipMalloc", err, n);
}
static int dt_release(void *p) { return hipFree(p) == hipSuccess ? 0 : -1; }
static int dt_to_device(void *d, const void *s, size_t b, char *err, size_t n) {
  if (check(hipMemcpyAsync(d, s, b, hipMemcpyHostToDevice, 0), "copy to device", err, n))
    return -1;
  return check(hipStreamSynchronize(0), "hipStreamSynchronize", err, n);
}
static int dt_to_host(void *d, const void *s, size_t b, char *err, size_t n) {
  if (check(hipMemcpyAsync(d, s, b, hipMemcpyDeviceToHost, 0), "copy to host", err, n))
    return -1;
  return check(hipStreamSynchronize(0), "hipStreamSynchronize", err, n);
}
static int dt_fill(void *p, int byte, size_t b, char *err, size_t n) {
  if (check(hipMemsetAsync(p, byte, b, 0), "hipMemset", err, n))
    return -1;
  return check(hipStreamSynchronize(0), "hipStreamSynchronize", err, n);
}
static int dt_stream_create(void **s, char *err, size_t n) {
  hipStream_t st;
  if (check(hipStreamCreate(&st), "hipStreamCreate", err, n))
    return -1;
  *s = (void *)st;
  return 0;
}
static int dt_stream_destroy(void *s) {
  return hipStreamDestroy((hipStream_t)s) == hipSuccess ? 0 : -1;
}
static int dt_stream_sync(void *s, char *err, size_t n) {
  return check(hipStreamSynchronize((hipStream_t)s), "hipStreamSynchronize", err, n);
}
static int dt_to_device_async(void *d, const void *src, size_t b, void *s, char *err, size_t n) {
  return check(hipMemcpyAsync(d, src, b, hipMemcpyHostToDevice, (hipStream_t)s), "copy to device",
               err, n);
}

struct graph_pair {
  graph_t graph;
  graph_exec_t exec;
};

static int dt_capture_begin(void *s, char *err, size_t n) {
  return check(BEGIN_CAPTURE((hipStream_t)s), "begin capture", err, n);
}
static int dt_capture_end(void *s, void **out, char *err, size_t n) {
  graph_pair *g = new graph_pair();
  if (check(END_CAPTURE((hipStream_t)s, &g->graph), "end capture", err, n) ||
      check(INSTANTIATE(&g->exec, g->graph), "instantiate graph", err, n)) {
    delete g;
    return -1;
  }
  *out = g;
  return 0;
}
static int dt_graph_launch(void *g, void *s, char *err, size_t n) {
  return check(GRAPH_LAUNCH(((graph_pair *)g)->exec, (hipStream_t)s), "graph launch", err, n);
}
static int dt_graph_destroy(void *gp) {
  graph_pair *g = (graph_pair *)gp;
  (void)GRAPH_EXEC_DESTROY(g->exec);
  (void)GRAPH_DESTROY(g->graph);
  delete g;
  return 0;
}

static int dt_time(void *s, int (*fn)(void *), void *arg, double *sec, char *err, size_t n) {
  hipEvent_t a, b;
  hipStream_t st = (hipStream_t)s;
  if (check(hipEventCreate(&a), "hipEventCreate", err, n))
    return -1;
  if (check(hipEventCreate(&b), "hipEventCreate", err, n)) {
    (void)hipEventDestroy(a);
    return -1;
  }
  int rc = check(hipEventRecord(a, st), "hipEventRecord", err, n);
  if (rc == 0 && fn(arg) != 0) {
    if (err)
      snprintf(err, n, "the timed call failed");
    rc = -1;
  }
  if (rc == 0)
    rc = check(hipEventRecord(b, st), "hipEventRecord", err, n);
  if (rc == 0)
    rc = check(hipEventSynchronize(b), "hipEventSynchronize", err, n);
  float ms = 0.0f;
  if (rc == 0)
    rc = check(hipEventElapsedTime(&ms, a, b), "hipEventElapsedTime", err, n);
  *sec = 1e-3 * ms;
  (void)hipEventDestroy(a);
  (void)hipEventDestroy(b);
  return rc;
}

__global__ void copy_kernel(const uint4 *__restrict__ in, uint4 *__restrict__ out, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = in[i];
}

/* Reads every word, U independent loads a thread in flight; the XOR of a
 * thread's words is stored only when it is all ones (it is not: the
 * buffer is filled with bytes 1), so that the loads stay. */
template <int U>
__global__ void read_kernel(const uint4 *__restrict__ in, uint4 *__restrict__ out, size_t n) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  uint4 x = {0u, 0u, 0u, 0u};
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; u++)
      v[u] = in[i + u * stride];
#pragma unroll
    for (int u = 0; u < U; u++)
      x.x ^= v[u].x, x.y ^= v[u].y, x.z ^= v[u].z, x.w ^= v[u].w;
  }
  for (; i < n; i += stride) {
    const uint4 v = in[i];
    x.x ^= v.x, x.y ^= v.y, x.z ^= v.z, x.w ^= v.w;
  }
  if ((x.x & x.y & x.z & x.w) == 0xffffffffu)
    out[threadIdx.x] = x;
}

/* The best of repeats timed runs of the copy (loads 0: bytes read and
 * written) or of the reader with `loads' loads a thread in flight (1, 4). */
static int bandwidth(int loads, size_t bytes, int repeats, double *bps, char *err,
                     size_t n) {
  void *a = nullptr, *b = nullptr;
  size_t words = bytes / 16;
  if (check(hipMalloc(&a, words * 16), "hipMalloc", err, n))
    return -1;
  if (check(hipMalloc(&b, loads ? 4096 : words * 16), "hipMalloc", err, n)) {
    (void)hipFree(a);
    return -1;
  }
  int rc = check(hipMemsetAsync(a, 1, words * 16, 0), "hipMemset", err, n);
  hipDeviceProp_t p;
  if (rc == 0)
    rc = check(hipGetDeviceProperties(&p, 0), "hipGetDeviceProperties", err, n);
  dim3 grid(rc == 0 ? p.multiProcessorCount * 8 : 1), block(256);
  double best = 0.0;
  for (int i = 0; rc == 0 && i <= repeats; i++) {
    struct arg_t {
      const uint4 *in;
      uint4 *out;
      size_t n;
      dim3 grid, block;
      int loads;
    } arg = {(const uint4 *)a, (uint4 *)b, words, grid, block, loads};
    double sec = 0.0;
    rc = dt_time(
        0,
        [](void *x) -> int {
          arg_t *t = (arg_t *)x;
          (void)hipGetLastError(); /* only this launch's error counts */
          if (t->loads == 1)
            hipLaunchKernelGGL(read_kernel<1>, t->grid, t->block, 0, 0, t->in, t->out, t->n);
          else if (t->loads == 4)
            hipLaunchKernelGGL(read_kernel<4>, t->grid, t->block, 0, 0, t->in, t->out, t->n);
          else
            hipLaunchKernelGGL(copy_kernel, t->grid, t->block, 0, 0, t->in, t->out, t->n);
          return hipGetLastError() == hipSuccess ? 0 : -1;
        },
        &arg, &sec, err, n);
    if (rc == 0 && i > 0 && sec > 0.0) {
      double v = (loads ? 1.0 : 2.0) * (double)(words * 16) / sec;
      best = v > best ? v : best; /* the ceiling: the best of the repeats */
    }
  }
  (void)hipFree(a);
  (void)hipFree(b);
  *bps = best;
  return rc;
}

static int dt_copy_bandwidth(size_t bytes, int repeats, double *bps, char *err, size_t n) {
  return bandwidth(0, bytes, repeats, bps, err, n);
}

/* The better of a reader with one load in flight a thread and one with
 * four: a ceiling must not flatter the figures set against it. */
static int dt_read_bandwidth(size_t bytes, int repeats, double *bps, char *err, size_t n) {
  double one = 0.0, four = 0.0;
  const int rc = bandwidth(1, bytes, repeats, &one, err, n);
  if (rc != 0)
    return rc;
  const int rc4 = bandwidth(4, bytes, repeats, &four, err, n);
  *bps = one > four ? one : four;
  return rc4;
}

#define FMA_CHAINS 8
#define FMA_ITERS 4096

__global__ void fma_kernel(float *out, float seed) {
  float v[FMA_CHAINS];
#pragma unroll
  for (int i = 0; i < FMA_CHAINS; i++)
    v[i] = seed + (float)(threadIdx.x + i);
  for (int it = 0; it < FMA_ITERS; it++) {
#pragma unroll
    for (int i = 0; i < FMA_CHAINS; i++)
      v[i] = fmaf(v[i], 0.999999f, 1e-7f);
  }
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < FMA_CHAINS; i++)
    s += v[i];
  if (s == 12345.678f)
    out[threadIdx.x] = s; /* keeps the loop alive */
}

static int dt_fma_peak(double *flops, char *err, size_t n) {
  hipDeviceProp_t p;
  if (check(hipGetDeviceProperties(&p, 0), "hipGetDeviceProperties", err, n))
    return -1;
  float *out = nullptr;
  if (check(hipMalloc((void **)&out, 4096), "hipMalloc", err, n))
    return -1;
  dim3 grid(p.multiProcessorCount * 16), block(256);
  double best = 0.0;
  int rc = 0;
  for (int i = 0; rc == 0 && i < 4; i++) {
    struct arg_t {
      float *out;
      dim3 grid, block;
    } arg = {out, grid, block};
    double sec = 0.0;
    rc = dt_time(
        0,
        [](void *x) -> int {
          arg_t *t = (arg_t *)x;
          (void)hipGetLastError(); /* only this launch's error counts */
          hipLaunchKernelGGL(fma_kernel, t->grid, t->block, 0, 0, t->out, 1.0f);
          return hipGetLastError() == hipSuccess ? 0 : -1;
        },
        &arg, &sec, err, n);
    double f = 2.0 * FMA_CHAINS * (double)FMA_ITERS * grid.x * block.x;
    if (rc == 0 && i > 0 && sec > 0.0 && f / sec > best)
      best = f / sec;
  }
  (void)hipFree(out);
  *flops = best;
  return rc;
}

static int dt_device_name(char *name, size_t len) {
  hipDeviceProp_t p;
  if (hipGetDeviceProperties(&p, 0) != hipSuccess)
    return -1;
  snprintf(name, len, "%s", p.name);
  return 0;
}

static int dt_inject_device_failure(int on) {
  m3idx_gpu_inject_bad_device = on != 0;
  return 0;
}

static int dt_inject_broken_fast_path(int on) {
  m3idx_gpu_break_fast_path(on);
  return 0;
}

static int dt_scoring_path(int device, char *why, size_t n) {
  return m3idx_gpu_path_verdict(device, why, n);
}

static const char *dt_scoring_kernel(int i) {
  return i >= 0 && i < m3idx_gpu_kernel_count() ? m3idx_gpu_kernel_name(i) : NULL;
}

static const struct m3idx_devtools tools = {
    M3IDX_DEVTOOLS_ABI, dt_alloc, dt_release, dt_to_device, dt_to_host, dt_fill,
    dt_stream_create, dt_stream_destroy, dt_stream_sync, dt_to_device_async,
    dt_capture_begin, dt_capture_end, dt_graph_launch, dt_graph_destroy, dt_time,
    dt_copy_bandwidth, dt_fma_peak, dt_device_name, dt_inject_device_failure,
    dt_inject_broken_fast_path, dt_scoring_path, dt_scoring_kernel, dt_read_bandwidth,
};

EXPORT const struct m3idx_devtools *m3idx_plugin_devtools(void) { return &tools; }
