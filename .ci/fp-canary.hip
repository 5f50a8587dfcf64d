// fp-canary.hip - compiled with the plugin's flags by .ci/gpu-resources.sh:
// in m3idx_canary_mad, a*b+c must stay a multiply and an add (no
// contraction); in m3idx_canary_div, x/y must be IEEE division (with
// v_div_fixup), not fast math's reciprocal.
#include <hip/hip_runtime.h>
extern "C" __global__ void m3idx_canary_mad(float *out, const float *a, const float *b,
                                            const float *c) {
  const int i = threadIdx.x;
  out[i] = a[i] * b[i] + c[i];
}
extern "C" __global__ void m3idx_canary_div(float *out, const float *a, const float *b) {
  const int i = threadIdx.x;
  out[i] = a[i] / b[i];
}
