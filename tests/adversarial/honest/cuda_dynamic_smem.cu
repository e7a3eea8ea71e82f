/* Honest: a CUDA kernel with dynamic shared memory sized per launch (over the 48 KiB default).

Row sums: each block stages a tile of its row in `extern __shared__` memory, sized at launch from
the row length (up to 96 KiB, opted in with cudaFuncSetAttribute), then reduces it. Dynamic shared
memory and the attribute are ordinary launch configuration, not work hidden from the profile.

task: row_sum
language: cuda
modes: gpu
*/
#include <cstdint>

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }

constexpr int kThreads = 256;
constexpr int kMaxTile = 96 * 1024 / sizeof(float);  // floats staged per pass

static __global__ void row_sum_staged(const scalar_t* x, scalar_t* out, int64_t cols, int tile) {
    extern __shared__ float staged[];
    __shared__ float partial[kThreads];
    const scalar_t* xr = x + (int64_t)blockIdx.x * cols;
    float s = 0.0f;
    for (int64_t start = 0; start < cols; start += tile) {
        int64_t len = cols - start < tile ? cols - start : tile;
        for (int64_t c = threadIdx.x; c < len; c += kThreads) staged[c] = to_float(xr[start + c]);
        __syncthreads();
        for (int64_t c = threadIdx.x; c < len; c += kThreads) s += staged[c];
        __syncthreads();
    }
    partial[threadIdx.x] = s;
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) store(&out[blockIdx.x], partial[0]);
}

extern "C" void solution(const scalar_t* x, scalar_t* out, int64_t rows, int64_t cols, cudaStream_t stream) {
    if (rows <= 0) return;
    int tile = (int)(cols < kMaxTile ? (cols > 0 ? cols : 1) : kMaxTile);
    size_t bytes = (size_t)tile * sizeof(float);
    cudaFuncSetAttribute(row_sum_staged, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
    row_sum_staged<<<(unsigned)rows, kThreads, bytes, stream>>>(x, out, cols, tile);
}
