/* Honest: a grid sized by the occupancy API (several resident blocks per SM), on the given stream.

Asks cudaOccupancyMaxActiveBlocksPerMultiprocessor how many blocks of this kernel fit on one SM,
launches that many per SM (once, cached) and lets each thread walk the vector with a grid-stride
loop. Few, long-lived blocks, all on the caller's stream; nothing left running after the call.

task: vector_add
language: cuda
modes: gpu
*/
#include <cuda_runtime.h>
#include <cstdint>

constexpr int kThreads = 256;

static __global__ void add_grid_stride(const float* x, const float* y, float* out, int64_t n) {
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += stride) out[i] = x[i] + y[i];
}

extern "C" void solution(const float* x, const float* y, float* out, int64_t n, cudaStream_t stream) {
    static int blocks = 0;
    if (blocks == 0) {
        int device = 0, sms = 0, per_sm = 0;
        cudaGetDevice(&device);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, add_grid_stride, kThreads, 0);
        blocks = sms * (per_sm > 0 ? per_sm : 1);
    }
    int64_t needed = (n + kThreads - 1) / kThreads;
    if (n > 0) add_grid_stride<<<(unsigned)(needed < blocks ? needed : blocks), kThreads, 0, stream>>>(x, y, out, n);
}
