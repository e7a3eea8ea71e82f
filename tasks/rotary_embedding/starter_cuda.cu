// Starter: one thread per rotated pair (token, head, i < head_dim/2), float32 math.
// Correct for any even head_dim. Neighbouring threads touch neighbouring elements, so the
// accesses coalesce, but each thread moves single 2- or 4-byte elements and re-reads its
// cos/sin values once per head. A fast version has each thread move 16-byte vectors and
// reuses a token's cos/sin row across its heads.
#include <cstdint>

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }

// `static` keeps the kernel's symbol private to this library: two libraries loaded into one
// process that both define a kernel of the same name could otherwise launch each other's.
static __global__ void rope_kernel(const scalar_t* x, const float* cos, const float* sin, scalar_t* out,
                                   int64_t pairs, int64_t heads, int64_t half) {
    const int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= pairs) return;
    const int64_t row = p / half;   // token * heads + head
    const int64_t i = p - row * half;
    const int64_t token = row / heads;
    const int64_t base = row * 2 * half;
    const float x1 = to_float(x[base + i]), x2 = to_float(x[base + half + i]);
    const float c = cos[token * half + i], s = sin[token * half + i];
    store(&out[base + i], x1 * c - x2 * s);
    store(&out[base + half + i], x2 * c + x1 * s);
}

extern "C" void solution(const scalar_t* x, const float* cos, const float* sin, scalar_t* out,
                         int64_t tokens, int64_t heads, int64_t head_dim, cudaStream_t stream) {
    const int64_t half = head_dim / 2;
    const int64_t pairs = tokens * heads * half;
    if (pairs <= 0) return;
    const int threads = 256;
    const int64_t blocks = (pairs + threads - 1) / threads;
    rope_kernel<<<(unsigned)blocks, threads, 0, stream>>>(x, cos, sin, out, pairs, heads, half);
}
