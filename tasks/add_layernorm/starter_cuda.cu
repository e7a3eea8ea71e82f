// Starter: one thread per row. Pass 1 writes h = x + residual and sums it,
// pass 2 reads h back for the variance, pass 3 writes y. Correct for any shape
// but slow: a warp's 32 threads touch 32 different rows (uncoalesced), and h is
// read back from memory twice. A fast version gives each row a warp or a block
// and keeps h in registers between writing it and normalizing it.
#include <cstdint>

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }
__device__ __forceinline__ float round_to(float*, float v) { return v; }
__device__ __forceinline__ float round_to(__nv_bfloat16*, float v) { return __bfloat162float(__float2bfloat16(v)); }

// `static` keeps the kernel's symbol private to this library: two libraries loaded into one
// process that both define a kernel of the same name could otherwise launch each other's.
static __global__ void add_layernorm_kernel(const scalar_t* x, const scalar_t* residual, const scalar_t* weight,
                                            const scalar_t* bias, scalar_t* h, scalar_t* y, int64_t rows,
                                            int64_t cols) {
    const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const int64_t base = r * cols;

    // The sums are doubles: one thread adds up to tens of thousands of terms in sequence, and a
    // float running sum would drift past the float32 tolerance.
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
        // Round h to its storage type first: the norm must see the h that is returned.
        const float hv = round_to(h, to_float(x[base + c]) + to_float(residual[base + c]));
        store(&h[base + c], hv);  // exact: hv is already representable
        sum += hv;
    }
    const float mean = (float)(sum / cols);
    double sq = 0.0;  // this thread reads back only what it wrote itself: no synchronization needed
    for (int64_t c = 0; c < cols; ++c) {
        const float d = to_float(h[base + c]) - mean;
        sq += (double)d * d;
    }
    const float rstd = (float)(1.0 / sqrt(sq / cols + 1e-5));  // biased variance, eps = 1e-5
    for (int64_t c = 0; c < cols; ++c)
        store(&y[base + c], (to_float(h[base + c]) - mean) * rstd * to_float(weight[c]) + to_float(bias[c]));
}

extern "C" void solution(const scalar_t* x, const scalar_t* residual, const scalar_t* weight, const scalar_t* bias,
                         scalar_t* h, scalar_t* y, int64_t rows, int64_t cols, cudaStream_t stream) {
    if (rows <= 0 || cols <= 0) return;
    const int threads = 128;
    const int64_t blocks = (rows + threads - 1) / threads;
    add_layernorm_kernel<<<(unsigned)blocks, threads, 0, stream>>>(x, residual, weight, bias, h, y, rows, cols);
}
