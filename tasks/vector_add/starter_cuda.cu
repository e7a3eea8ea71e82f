// Starter: one thread per element. Correct at any n; a fast version would use
// 16-byte (float4) loads and give each thread several elements to keep more
// memory requests in flight.
#include <cstdint>

// `static` keeps the kernel's symbol private to this library: two libraries loaded into one
// process that both define a kernel of the same name could otherwise launch each other's.
static __global__ void add_kernel(const float* x, const float* y, float* out, int64_t n) {
    // 64-bit index: n can exceed what a 32-bit product of block and thread ids holds.
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + y[i];  // the last block usually runs past n
}

extern "C" void solution(const float* x, const float* y, float* out, int64_t n, cudaStream_t stream) {
    if (n <= 0) return;
    const int threads = 256;
    const int64_t blocks = (n + threads - 1) / threads;
    add_kernel<<<(unsigned)blocks, threads, 0, stream>>>(x, y, out, n);
}
