// Starter: one thread per output element, a float32 dot product over k of fp8 values widened to
// float, then the two scales and one bfloat16 store. Correct at any m, n, k, but it uses no tensor
// cores and re-reads a and b from memory (or cache) for every output. The fast path on Hopper:
// tiles of a and b in shared memory (TMA), fp8 wgmma (k = 32 per instruction, both operands
// K-major, which is how they arrive), and this epilogue applied to the accumulator tile.
#include <cstdint>
#include <cuda_fp8.h>

// `static` keeps the kernel's symbol private to this library: two libraries loaded into one
// process that both define a kernel of the same name could otherwise launch each other's.
static __global__ void fp8_gemm_kernel(const __nv_fp8_e4m3* a, const __nv_fp8_e4m3* b, const float* scale_a,
                                       const float* scale_b, __nv_bfloat16* c, int m, int n, int k) {
    // x runs along columns of c (rows of b), y along rows of c (rows of a).
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= m || col >= n) return;
    const __nv_fp8_e4m3* arow = a + (int64_t)row * k;
    const __nv_fp8_e4m3* brow = b + (int64_t)col * k;
    float acc = 0.0f;
    for (int i = 0; i < k; ++i) acc += float(arow[i]) * float(brow[i]);
    c[(int64_t)row * n + col] = __float2bfloat16(acc * (scale_a[0] * scale_b[0]));
}

extern "C" void solution(const __nv_fp8_e4m3* a, const __nv_fp8_e4m3* b, const float* scale_a, const float* scale_b,
                         __nv_bfloat16* c, int m, int n, int k, cudaStream_t stream) {
    if (m <= 0 || n <= 0) return;
    dim3 block(16, 16);
    dim3 grid((n + block.x - 1) / block.x, (m + block.y - 1) / block.y);
    fp8_gemm_kernel<<<grid, block, 0, stream>>>(a, b, scale_a, scale_b, c, m, n, k);
}
