// Starter: one thread per element of c, a plain dot product over k with a
// float32 accumulator; blockIdx.z picks the batch entry. Correct at any sizes,
// but it uses no tensor cores and re-reads a and b from memory (or cache) for
// every output. The fast path: tiles of a and b staged in shared memory, then
// mma/wgmma instructions, with the batch index as one more grid dimension.
#include <cstdint>

// `static` keeps the kernel's symbol private to this library: two libraries loaded into one
// process that both define a kernel of the same name could otherwise launch each other's.
static __global__ void bmm_kernel(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c,
                                  int m, int n, int k) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= m || col >= n) return;
    const int64_t z = blockIdx.z;  // 64-bit: batch * m * k can pass 2**31
    const __nv_bfloat16* az = a + z * m * k;
    const __nv_bfloat16* bz = b + z * k * n;
    float acc = 0.0f;
    for (int i = 0; i < k; ++i)
        acc += __bfloat162float(az[(int64_t)row * k + i]) * __bfloat162float(bz[(int64_t)i * n + col]);
    c[z * m * n + (int64_t)row * n + col] = __float2bfloat16(acc);
}

extern "C" void solution(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c,
                         int batch, int m, int n, int k, cudaStream_t stream) {
    if (batch <= 0 || m <= 0 || n <= 0) return;
    dim3 block(16, 16);
    // gridDim.z is limited to 65535 batch entries; gridDim.y to 65535 * 16 rows.
    dim3 grid((n + block.x - 1) / block.x, (m + block.y - 1) / block.y, batch);
    bmm_kernel<<<grid, block, 0, stream>>>(a, b, c, m, n, k);
}
