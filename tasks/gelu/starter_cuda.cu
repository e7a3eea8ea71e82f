// Starter: one thread per element, computed in float32 whatever the storage
// type. Already fused (one read, one write per element); a faster version
// would move 16 bytes per load and store.
#include <cstdint>

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }

// `static` keeps the kernel's symbol private to this library: two libraries loaded into one
// process that both define a kernel of the same name could otherwise launch each other's.
static __global__ void gelu_kernel(const scalar_t* x, scalar_t* out, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float v = to_float(x[i]);
    const float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);  // sqrt(2/pi) * (...)
    store(&out[i], 0.5f * v * (1.0f + tanhf(u)));
}

extern "C" void solution(const scalar_t* x, scalar_t* out, int64_t n, cudaStream_t stream) {
    if (n <= 0) return;
    const int threads = 256;
    const int64_t blocks = (n + threads - 1) / threads;
    gelu_kernel<<<(unsigned)blocks, threads, 0, stream>>>(x, out, n);
}
