/* Honest: a CUDA solution with cudaMallocAsync scratch memory (stream-ordered, freed per call).

Row sums in two kernels on the judge's stream: float32 partials per (row, chunk) into a scratch
buffer from cudaMallocAsync, then one thread per row adds its partials and rounds once to the
output dtype; the scratch is released with cudaFreeAsync on the same stream. Never accumulates
into the NaN-filled output.

task: row_sum
language: cuda
modes: gpu
*/
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdint>

__device__ inline float to_f(float v) { return v; }
__device__ inline float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ inline void store(float* p, float v) { *p = v; }
__device__ inline void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }

constexpr int CHUNK = 8192;
constexpr int THREADS = 256;

__global__ void partials(const scalar_t* x, float* ws, int64_t cols, int64_t chunks) {
    int64_t row = blockIdx.x, chunk = blockIdx.y;  // rows on x: gridDim.y stops at 65535
    const scalar_t* p = x + row * cols;
    int64_t begin = chunk * CHUNK, end = min(begin + CHUNK, cols);
    float acc = 0.f;
    for (int64_t j = begin + threadIdx.x; j < end; j += THREADS) acc += to_f(p[j]);
    __shared__ float sh[THREADS];
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) ws[row * chunks + chunk] = sh[0];
}

__global__ void finish(const float* ws, scalar_t* out, int64_t rows, int64_t chunks) {
    int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (row >= rows) return;
    float acc = 0.f;
    for (int64_t c = 0; c < chunks; ++c) acc += ws[row * chunks + c];
    store(out + row, acc);
}

extern "C" void solution(const scalar_t* x, scalar_t* out, int64_t rows, int64_t cols, cudaStream_t stream) {
    int64_t chunks = (cols + CHUNK - 1) / CHUNK;
    float* ws = nullptr;
    cudaMallocAsync(&ws, sizeof(float) * rows * chunks, stream);
    partials<<<dim3((unsigned)rows, (unsigned)chunks), THREADS, 0, stream>>>(x, ws, cols, chunks);
    finish<<<(unsigned)((rows + 255) / 256), 256, 0, stream>>>(ws, out, rows, chunks);
    cudaFreeAsync(ws, stream);
}
