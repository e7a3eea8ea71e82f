// Starter: one element per thread; each 256-thread block adds its elements as
// a tree in shared memory and thread 0 adds the block's sum to *out with an
// atomic. Correct for any n, but every thread does one 4-byte load and little
// else, and n / 256 atomics queue on a single address. A fast version gives
// each thread many 16-byte loads (a grid-stride loop over a few thousand
// blocks) and combines the block sums in a second tiny kernel or with far
// fewer atomics.
#include <cstdint>

constexpr int kThreads = 256;

// `static` keeps the kernel's symbol private to this library: two libraries loaded into one
// process that both define a kernel of the same name could otherwise launch each other's.
static __global__ void sum_kernel(const float* x, float* out, int64_t n) {
    __shared__ float partial[kThreads];
    const int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x;
    partial[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, partial[0]);
}

extern "C" void solution(const float* x, float* out, int64_t n, cudaStream_t stream) {
    // The judge fills the output with NaN; the atomics need it to start at 0. The memset is
    // queued on the same stream, so it finishes before the kernel starts.
    cudaMemsetAsync(out, 0, sizeof(float), stream);
    if (n <= 0) return;
    const int64_t blocks = (n + kThreads - 1) / kThreads;
    sum_kernel<<<(unsigned)blocks, kThreads, 0, stream>>>(x, out, n);
}
