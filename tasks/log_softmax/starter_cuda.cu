// Starter: one thread per row, three passes over the row (max, sum, write).
// Correct for any shape but slow: a warp's 32 threads read 32 different rows
// (uncoalesced), and each row is read from memory three times. A fast version
// gives each row a warp or a block, keeps the row in registers and reads it once.
#include <cstdint>

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }

// `static` keeps the kernel's symbol private to this library: two libraries loaded into one
// process that both define a kernel of the same name could otherwise launch each other's.
static __global__ void log_softmax_kernel(const scalar_t* x, scalar_t* out, int64_t rows, int64_t cols) {
    const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const scalar_t* xr = x + r * cols;
    scalar_t* yr = out + r * cols;

    // Subtracting the maximum keeps exp() from overflowing; the result is unchanged.
    float mx = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) mx = fmaxf(mx, to_float(xr[c]));
    // A running float sum over 100000 terms drifts past the float32 tolerance; a double does
    // not. (A parallel version sums in a tree instead, which keeps float accurate.)
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) sum += expf(to_float(xr[c]) - mx);
    const float log_sum = (float)log(sum);
    // x - max - log(sum): never log(0), unlike log(softmax(x)).
    for (int64_t c = 0; c < cols; ++c) store(&yr[c], to_float(xr[c]) - mx - log_sum);
}

extern "C" void solution(const scalar_t* x, scalar_t* out, int64_t rows, int64_t cols, cudaStream_t stream) {
    if (rows <= 0 || cols <= 0) return;
    const int threads = 128;
    const int64_t blocks = (rows + threads - 1) / threads;
    log_softmax_kernel<<<(unsigned)blocks, threads, 0, stream>>>(x, out, rows, cols);
}
