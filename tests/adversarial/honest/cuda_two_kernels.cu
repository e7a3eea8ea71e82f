/* Honest: a CUDA solution with two kernels per call, both on the judge's stream.

Adds the first half of the vector with one kernel and the rest with a second, vectorised one;
both go on `stream`, in order, so nothing escapes the timing and nothing needs a synchronize.

task: vector_add
language: cuda
modes: gpu
*/
#include <cuda_runtime.h>
#include <cstdint>

__global__ void add_scalar(const float* x, const float* y, float* out, int64_t begin, int64_t end) {
    int64_t i = begin + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < end) out[i] = x[i] + y[i];
}

__global__ void add_vec4(const float4* x, const float4* y, float4* out, int64_t n4) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 a = x[i], b = y[i];
        out[i] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
    }
}

extern "C" void solution(const float* x, const float* y, float* out, int64_t n, cudaStream_t stream) {
    int64_t n4 = n / 4;  // the judge's buffers are 16-byte aligned
    if (n4 > 0)
        add_vec4<<<(unsigned)((n4 + 255) / 256), 256, 0, stream>>>((const float4*)x, (const float4*)y, (float4*)out, n4);
    if (n - 4 * n4 > 0)
        add_scalar<<<1, 256, 0, stream>>>(x, y, out, 4 * n4, n);
}
