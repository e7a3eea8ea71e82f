// Baseline: row softmax that reads each row from DRAM once and writes it once.
//
// A row is spread over TPR threads (one warp for rows up to 1024 elements,
// otherwise one block of up to 1024 threads) and held in registers, EPT
// floats per thread, so max, sum and normalise all run on registers. When the
// rows are 16-byte aligned (cols a multiple of 4 floats / 8 bf16s), loads and
// stores are 16-byte vectors. Rows longer than 32768 elements, which would not
// fit, take an online-softmax kernel that reads the row twice (the second time
// mostly from L2). Arithmetic is float32 for both dtypes.
#include <cstdint>

constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16(v); }

template <typename T> struct alignas(16) Vec { T v[16 / sizeof(T)]; };

// Reduce over the TPR threads of a row: shuffles within the warp, then (for a
// block-wide row) one slot per warp in shared memory. Each call needs its own
// `slots` array, so that no second barrier is needed before reuse.
template <int TPR, bool IS_MAX>
__device__ __forceinline__ float row_reduce(float v, float* slots) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const float o = __shfl_xor_sync(0xffffffffu, v, off);
        v = IS_MAX ? fmaxf(v, o) : v + o;
    }
    if constexpr (TPR > 32) {
        if ((threadIdx.x & 31) == 0) slots[threadIdx.x >> 5] = v;
        __syncthreads();
        v = slots[0];
#pragma unroll
        for (int w = 1; w < TPR / 32; ++w) v = IS_MAX ? fmaxf(v, slots[w]) : v + slots[w];
    }
    return v;
}

// TPR: threads per row (32, or a whole block of >= 128). EPT: elements per thread.
// VEC: rows are 16-byte aligned, so thread t owns whole vectors at columns
// (i*TPR + t)*V; otherwise it owns single elements at columns j*TPR + t. Both
// mappings make consecutive threads touch consecutive memory.
template <typename T, int TPR, int EPT, bool VEC>
static __global__ void __launch_bounds__(TPR >= 128 ? TPR : 128)
softmax_regs(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int cols) {
    constexpr int V = 16 / sizeof(T);
    static_assert(!VEC || EPT % V == 0, "a thread holds whole vectors");
    __shared__ float slots_max[32], slots_sum[32];

    int64_t row;
    int t;
    if constexpr (TPR == 32) {  // a warp per row, 4 rows per 128-thread block
        row = (int64_t)blockIdx.x * 4 + (threadIdx.x >> 5);
        t = threadIdx.x & 31;
        if (row >= rows) return;  // whole warp leaves together: later shuffles stay full-warp
    } else {                      // a block per row; the grid has exactly `rows` blocks
        row = blockIdx.x;
        t = threadIdx.x;
    }
    const T* xr = x + row * cols;
    T* yr = y + row * cols;

    float v[EPT];  // padding past the row end is -inf, which drops out of max and sum
    if constexpr (VEC) {
#pragma unroll
        for (int i = 0; i < EPT / V; ++i) {
            const int c = (i * TPR + t) * V;
            if (c < cols) {  // cols % V == 0, so a vector is wholly inside or wholly outside
                const Vec<T> r = *reinterpret_cast<const Vec<T>*>(xr + c);
#pragma unroll
                for (int j = 0; j < V; ++j) v[i * V + j] = to_float(r.v[j]);
            } else {
#pragma unroll
                for (int j = 0; j < V; ++j) v[i * V + j] = -INFINITY;
            }
        }
    } else {
#pragma unroll
        for (int j = 0; j < EPT; ++j) {
            const int c = j * TPR + t;
            v[j] = c < cols ? to_float(xr[c]) : -INFINITY;
        }
    }

    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < EPT; ++j) mx = fmaxf(mx, v[j]);
    mx = row_reduce<TPR, true>(mx, slots_max);

    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < EPT; ++j) {
        v[j] = exp2f((v[j] - mx) * kLog2e);  // exp(-inf) = 0 for the padding
        sum += v[j];
    }
    sum = row_reduce<TPR, false>(sum, slots_sum);
    const float inv = 1.0f / sum;

    if constexpr (VEC) {
#pragma unroll
        for (int i = 0; i < EPT / V; ++i) {
            const int c = (i * TPR + t) * V;
            if (c < cols) {
                Vec<T> o;
#pragma unroll
                for (int j = 0; j < V; ++j) o.v[j] = from_float<T>(v[i * V + j] * inv);
                *reinterpret_cast<Vec<T>*>(yr + c) = o;
            }
        }
    } else {
#pragma unroll
        for (int j = 0; j < EPT; ++j) {
            const int c = j * TPR + t;
            if (c < cols) yr[c] = from_float<T>(v[j] * inv);
        }
    }
}

// Combine two partial (max, sum-of-exp relative to that max) pairs. A pair with
// max = -inf has sum 0 and contributes nothing (and must not produce inf-inf).
__device__ __forceinline__ void combine(float& m, float& s, float m2, float s2) {
    const float M = fmaxf(m, m2);
    if (M == -INFINITY) return;
    s = (m == -INFINITY ? 0.0f : s * exp2f((m - M) * kLog2e)) + (m2 == -INFINITY ? 0.0f : s2 * exp2f((m2 - M) * kLog2e));
    m = M;
}

// Rows of any length: one block per row. Pass 1 keeps a running max and a sum
// rescaled whenever the max grows (online softmax); pass 2 writes the output.
template <typename T>
static __global__ void __launch_bounds__(1024) softmax_online(const T* __restrict__ x, T* __restrict__ y, int64_t cols) {
    __shared__ float sm[32], ss[32];
    const T* xr = x + (int64_t)blockIdx.x * cols;
    T* yr = y + (int64_t)blockIdx.x * cols;

    float m = -INFINITY, s = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        const float v = to_float(xr[c]);
        if (v > m) { s = s * exp2f((m - v) * kLog2e) + 1.0f; m = v; }  // first time: 0 * 0 + 1
        else s += exp2f((v - m) * kLog2e);
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        combine(m, s, __shfl_xor_sync(0xffffffffu, m, off), __shfl_xor_sync(0xffffffffu, s, off));
    if ((threadIdx.x & 31) == 0) { sm[threadIdx.x >> 5] = m; ss[threadIdx.x >> 5] = s; }
    __syncthreads();
    m = sm[0]; s = ss[0];
    for (int w = 1; w < (int)(blockDim.x >> 5); ++w) combine(m, s, sm[w], ss[w]);

    const float inv = 1.0f / s;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
        yr[c] = from_float<T>(exp2f((to_float(xr[c]) - m) * kLog2e) * inv);
}

template <typename T, int TPR, int EPT>
static bool try_launch(const T* x, T* y, int64_t rows, int64_t cols, bool vec, cudaStream_t stream) {
    if (cols > (int64_t)TPR * EPT) return false;
    const unsigned blocks = TPR == 32 ? (unsigned)((rows + 3) / 4) : (unsigned)rows;
    const int threads = TPR == 32 ? 128 : TPR;
    if (vec) softmax_regs<T, TPR, EPT, true><<<blocks, threads, 0, stream>>>(x, y, rows, (int)cols);
    else softmax_regs<T, TPR, EPT, false><<<blocks, threads, 0, stream>>>(x, y, rows, (int)cols);
    return true;
}

extern "C" void solution(const scalar_t* x, scalar_t* out, int64_t rows, int64_t cols, cudaStream_t stream) {
    if (rows <= 0 || cols <= 0) return;
    constexpr int V = 16 / sizeof(scalar_t);
    const bool vec = cols % V == 0 &&
                     ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(out)) & 15) == 0;
    // The smallest configuration that holds the row: fewer idle threads and registers.
    if (try_launch<scalar_t, 32, 8>(x, out, rows, cols, vec, stream)) return;
    if (try_launch<scalar_t, 32, 16>(x, out, rows, cols, vec, stream)) return;
    if (try_launch<scalar_t, 32, 32>(x, out, rows, cols, vec, stream)) return;
    if (try_launch<scalar_t, 128, 16>(x, out, rows, cols, vec, stream)) return;
    if (try_launch<scalar_t, 256, 16>(x, out, rows, cols, vec, stream)) return;
    if (try_launch<scalar_t, 512, 16>(x, out, rows, cols, vec, stream)) return;
    if (try_launch<scalar_t, 1024, 16>(x, out, rows, cols, vec, stream)) return;
    if (try_launch<scalar_t, 1024, 32>(x, out, rows, cols, vec, stream)) return;
    softmax_online<scalar_t><<<(unsigned)rows, 1024, 0, stream>>>(x, out, cols);
}
