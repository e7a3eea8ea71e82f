// Baseline: out = x^T through shared-memory tiles, so that both the reads of x
// and the writes of out are coalesced.
//
// A 32 x 8 block owns one 32 x 32 tile. Each warp (fixed threadIdx.y) reads 32
// consecutive floats of a row of x, four rows per thread, into the tile; after
// a barrier each warp writes 32 consecutive floats of a row of out, which is a
// column of the tile. The tile has 33 columns: with 32, a column's 32 floats
// would sit in one shared-memory bank and a warp reading it would be served one
// float at a time (a 32-way bank conflict); the extra column shifts each row by
// one bank, so tile[tx][k] for tx = 0..31 hits 32 different banks.
//
// Each thread has its four loads in flight before the barrier, and 8 blocks fit
// on an SM (2048 threads, 33 KB of shared memory), about 32 KB of reads in
// flight per SM: enough to keep DRAM busy. Accesses are 4 bytes each (no
// alignment assumptions, so any rows and cols work), coalesced into whole
// 128-byte lines per warp.
#include <cstdint>

constexpr int kTile = 32;
constexpr int kRowsPerPass = 8;  // blockDim = (kTile, kRowsPerPass): 256 threads, 4 elements each

static __global__ void __launch_bounds__(kTile * kRowsPerPass)
transpose_tiled(const float* __restrict__ x, float* __restrict__ out, int64_t rows, int64_t cols, int64_t tiles_c) {
    __shared__ float tile[kTile][kTile + 1];
    const int64_t tr = blockIdx.x / tiles_c;  // tile coordinates; tile columns vary fastest
    const int64_t tc = blockIdx.x - tr * tiles_c;
    const int64_t r0 = tr * kTile, c0 = tc * kTile;
    const int tx = threadIdx.x, ty = threadIdx.y;

    // Read x[r0 + ty + k, c0 + tx]: a warp covers 32 consecutive columns of one row.
    const int64_t c = c0 + tx;
#pragma unroll
    for (int k = 0; k < kTile; k += kRowsPerPass) {
        const int64_t r = r0 + ty + k;
        if (r < rows && c < cols) tile[ty + k][tx] = x[r * cols + c];
    }
    __syncthreads();
    // Write out[c0 + ty + k, r0 + tx] = x[r0 + tx, c0 + ty + k]: a warp covers 32 consecutive
    // columns of one row of out and reads a column of the tile (conflict-free thanks to the pad).
    const int64_t i = r0 + tx;
#pragma unroll
    for (int k = 0; k < kTile; k += kRowsPerPass) {
        const int64_t j = c0 + ty + k;
        if (j < cols && i < rows) out[j * rows + i] = tile[tx][ty + k];
    }
}

extern "C" void solution(const float* x, float* out, int64_t rows, int64_t cols, cudaStream_t stream) {
    if (rows <= 0 || cols <= 0) return;
    const int64_t tiles_r = (rows + kTile - 1) / kTile, tiles_c = (cols + kTile - 1) / kTile;
    // A one-dimensional grid of tiles: gridDim.y would cap rows at 65535 * 32. It holds up to
    // 2^31 - 1 tiles, i.e. matrices of up to 2^41 elements.
    const dim3 block(kTile, kRowsPerPass);
    transpose_tiled<<<(unsigned)(tiles_r * tiles_c), block, 0, stream>>>(x, out, rows, cols, tiles_c);
}
