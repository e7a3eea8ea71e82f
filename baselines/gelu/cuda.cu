// Baseline: fused tanh-GELU, one read and one write per element.
// 16-byte vector accesses (4 floats or 8 bfloat16s), kUnroll vectors per thread
// with all loads issued before any math, float32 arithmetic throughout.
// gelu(x) = 0.5*x*(1 + tanh(u)) is rewritten as x / (1 + exp(-2u)), which is the
// same function (1 + tanh(u) = 2 / (1 + exp(-2u))), costs one exp and one divide,
// and has no cancellation for negative x. For very negative x, exp(-2u) = inf
// and the quotient is -0, matching the reference's 0.
#include <cstdint>

constexpr int kThreads = 256;
constexpr int kUnroll = 4;

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16(v); }

__device__ __forceinline__ float gelu(float x) {
    const float u = 0.7978845608028654f * fmaf(0.044715f * x, x * x, x);  // sqrt(2/pi)*(x + 0.044715x^3)
    return x / (1.0f + __expf(-2.0f * u));
}

// A 16-byte bundle of elements, loaded and stored as one instruction.
template <typename T> struct alignas(16) Vec { T v[16 / sizeof(T)]; };

template <typename T>
static __global__ void __launch_bounds__(kThreads) gelu_vec(const T* __restrict__ x, T* __restrict__ out, int64_t n) {
    constexpr int V = 16 / sizeof(T);
    const int64_t nv = n / V;  // whole vectors; fewer than V elements remain as the tail
    const Vec<T>* xv = reinterpret_cast<const Vec<T>*>(x);
    Vec<T>* ov = reinterpret_cast<Vec<T>*>(out);

    const int64_t base = (int64_t)blockIdx.x * (kThreads * kUnroll) + threadIdx.x;
    Vec<T> r[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
        const int64_t i = base + (int64_t)u * kThreads;
        if (i < nv) r[u] = xv[i];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
        const int64_t i = base + (int64_t)u * kThreads;
        if (i < nv) {
            Vec<T> o;
#pragma unroll
            for (int j = 0; j < V; ++j) o.v[j] = from_float<T>(gelu(to_float(r[u].v[j])));
            ov[i] = o;
        }
    }
    if (blockIdx.x == 0 && threadIdx.x < n - nv * V) {  // tail, at most V-1 <= 7 elements
        const int64_t i = nv * V + threadIdx.x;
        out[i] = from_float<T>(gelu(to_float(x[i])));
    }
}

// Fallback for pointers that are not 16-byte aligned: one element per thread, grid-stride.
template <typename T>
static __global__ void gelu_scalar(const T* __restrict__ x, T* __restrict__ out, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = from_float<T>(gelu(to_float(x[i])));
}

extern "C" void solution(const scalar_t* x, scalar_t* out, int64_t n, cudaStream_t stream) {
    if (n <= 0) return;
    const bool aligned = ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(out)) & 15) == 0;
    if (aligned) {
        const int64_t per_block = (int64_t)kThreads * kUnroll * (16 / sizeof(scalar_t));
        const int64_t blocks = (n + per_block - 1) / per_block;  // >= 1, so the tail always has a block
        gelu_vec<scalar_t><<<(unsigned)blocks, kThreads, 0, stream>>>(x, out, n);
    } else {
        const int64_t blocks = (n + kThreads - 1) / kThreads;
        gelu_scalar<scalar_t><<<(unsigned)(blocks < 65536 ? blocks : 65536), kThreads, 0, stream>>>(x, out, n);
    }
}
