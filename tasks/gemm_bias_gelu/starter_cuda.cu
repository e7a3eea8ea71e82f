// Starter: one thread per output element, a plain dot product over k with a float32
// accumulator, then bias and tanh-GELU in float32 before the single bfloat16 store.
// Correct at any m, n, k, but it uses no tensor cores and re-reads a and w from memory
// (or cache) for every output. The fast path: tiles of a and w staged in shared memory,
// mma/wgmma instructions, and this same epilogue applied to the accumulator tile.
#include <cstdint>

// `static` keeps the kernel's symbol private to this library: two libraries loaded into one
// process that both define a kernel of the same name could otherwise launch each other's.
static __global__ void gemm_bias_gelu_kernel(const __nv_bfloat16* a, const __nv_bfloat16* w,
                                             const __nv_bfloat16* bias, __nv_bfloat16* out, int m, int n, int k) {
    // x runs along columns so that neighbouring threads read neighbouring w[] and write
    // neighbouring out[] elements (coalesced).
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= m || col >= n) return;
    float acc = 0.0f;
    for (int i = 0; i < k; ++i)
        acc += __bfloat162float(a[(int64_t)row * k + i]) * __bfloat162float(w[(int64_t)i * n + col]);
    const float h = acc + __bfloat162float(bias[col]);
    const float u = 0.7978845608028654f * (h + 0.044715f * h * h * h);  // sqrt(2/pi) * (h + 0.044715 h^3)
    out[(int64_t)row * n + col] = __float2bfloat16(0.5f * h * (1.0f + tanhf(u)));
}

extern "C" void solution(const __nv_bfloat16* a, const __nv_bfloat16* w, const __nv_bfloat16* bias,
                         __nv_bfloat16* out, int m, int n, int k, cudaStream_t stream) {
    if (m <= 0 || n <= 0) return;
    dim3 block(16, 16);
    dim3 grid((n + block.x - 1) / block.x, (m + block.y - 1) / block.y);
    gemm_bias_gelu_kernel<<<grid, block, 0, stream>>>(a, w, bias, out, m, n, k);
}
