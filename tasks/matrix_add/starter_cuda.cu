// Starter: one thread per output element, in row-major order. Reads of x and
// writes of out are coalesced (consecutive threads, consecutive columns), but
// y is column-major, so consecutive threads read y a whole column apart: one
// 32-byte memory sector per 4-byte element. A fast version stages tiles of y
// through shared memory so that both sides of the copy are coalesced.
#include <cstdint>

// `static` keeps the kernel's symbol private to this library: two libraries loaded into one
// process that both define a kernel of the same name could otherwise launch each other's.
static __global__ void add_kernel(const float* x, const float* y, float* out, int64_t rows, int64_t cols,
                                  int64_t xs0, int64_t xs1, int64_t ys0, int64_t ys1) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * cols) return;
    const int64_t r = i / cols, c = i % cols;
    // Strides are in elements: x[r, c] lives at x + r*xs0 + c*xs1, not at x + r*cols + c.
    out[i] = x[r * xs0 + c * xs1] + y[r * ys0 + c * ys1];
}

extern "C" void solution(const float* x, const float* y, float* out, int64_t rows, int64_t cols,
                         int64_t x_stride0, int64_t x_stride1, int64_t y_stride0, int64_t y_stride1,
                         cudaStream_t stream) {
    const int64_t n = rows * cols;
    if (n <= 0) return;
    const int threads = 256;
    const int64_t blocks = (n + threads - 1) / threads;
    add_kernel<<<(unsigned)blocks, threads, 0, stream>>>(x, y, out, rows, cols, x_stride0, x_stride1, y_stride0,
                                                         y_stride1);
}
