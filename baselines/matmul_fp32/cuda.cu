// Baseline: float32 GEMM on the FMA units (no tensor cores, no TF32), for
// row-major a (m x k), b (k x n), c (m x n).
//
// Block tile 128x128, k-step 8, 256 threads as a 16x16 grid; each thread owns
// an 8x8 block of c in registers (two 4-row by two 4-column quadrants, 64
// apart), so per k it reads 2 float4 of a and 2 float4 of b from shared memory
// and issues 64 FMAs. Tiles are double-buffered: the global loads of tile
// kt+1 are issued into registers before the FMAs of tile kt and stored to the
// other shared buffer after them, so one barrier per k-step suffices. The a
// tile is stored transposed (k-major), so both operands are read as float4
// along m / n; its rows are padded by 4 floats, which keeps the transposing
// stores free of bank conflicts. Within a warp the a reads are broadcasts and
// the b reads cover 16 consecutive float4s, also conflict-free.
//
// Edges: when k and n are multiples of 4 (and the pointers 16-byte aligned)
// global loads are float4, with whole vectors masked against the matrix
// bounds; otherwise the same kernel loads element by element with bounds
// checks. c is stored element by element: float4 stores would pin the
// accumulators to aligned register quads, which costs spills at the 128
// registers that two blocks per SM allow, and the epilogue is a small part of
// the time. Zeros past m, n or k add nothing; outputs outside c are never
// stored. Blocks are ordered in groups of 8 tile-rows so that concurrent
// blocks share panels of a and b in L2.
#include <cstdint>

namespace {

constexpr int BM = 128, BN = 128, BK = 8, THREADS = 256;
constexpr int TM = 8, TN = 8;    // outputs per thread
constexpr int A_LD = BM + 4;     // padded k-row of the transposed a tile
constexpr int GROUP_M = 8;

// The block's tile of c, in grouped order: consecutive blocks walk GROUP_M tile-rows down one
// tile-column, so the a-panels of the group and the current b-panel stay in L2. (Called again for
// the epilogue: recomputing from blockIdx and the kernel parameters is cheaper than keeping the
// result in registers across the main loop.)
__device__ __forceinline__ void tile_origin(int m, int n, int& block_m, int& block_n) {
    const int tiles_m = (m + BM - 1) / BM, tiles_n = (n + BN - 1) / BN;
    const int pid = blockIdx.x;
    const int group = pid / (GROUP_M * tiles_n);
    const int first_m = group * GROUP_M;
    const int rows_in_group = min(tiles_m - first_m, GROUP_M);
    const int in_group = pid - group * GROUP_M * tiles_n;
    block_m = (first_m + in_group % rows_in_group) * BM;
    block_n = (in_group / rows_in_group) * BN;
}

template <bool VEC>
static __global__ void __launch_bounds__(THREADS, 2)
sgemm_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int m, int n, int k) {
    __shared__ __align__(16) float As[2][BK][A_LD];  // As[s][kk][row]: a tile, transposed
    __shared__ __align__(16) float Bs[2][BK][BN];    // Bs[s][kk][col]

    int block_m, block_n;
    tile_origin(m, n, block_m, block_n);

    const int tid = threadIdx.x;
    // Global -> shared mapping: each thread moves 4 consecutive elements of a (along k) and 4 of b
    // (along n) per k-step.
    const int a_row = tid >> 1, a_col = (tid & 1) * 4;    // 128 rows x 2 groups of 4 k's
    const int b_row = tid >> 5, b_col = (tid & 31) * 4;   // 8 k's x 32 groups of 4 columns
    const int g_a_row = block_m + a_row, g_b_col = block_n + b_col;
    const float* a_src = a + (int64_t)min(g_a_row, m - 1) * k + a_col;  // clamped: never read out of range
    const float* b_src = b + (int64_t)b_row * n + g_b_col;
    const int64_t b_step = (int64_t)BK * n;

    // Compute mapping: thread (ty, tx) owns rows {ty*4 + i, 64 + ty*4 + i} and
    // columns {tx*4 + j, 64 + tx*4 + j}.
    const int tx = tid & 15, ty = tid >> 4;

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    float ra[4], rb[4];  // the next tile's elements, in flight in registers

    // a_src / b_src point at this thread's elements of the tile being loaded; each load moves
    // them one k-step on (a running pointer keeps 64-bit address arithmetic out of the loop).
    auto load_global = [&](int k0) {
        if constexpr (VEC) {
            // k % 4 == 0 and n % 4 == 0: a 4-vector is wholly inside or wholly outside.
            const bool a_ok = g_a_row < m && k0 + a_col < k;
            const bool b_ok = k0 + b_row < k && g_b_col < n;
            const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
            const float4 va = a_ok ? *reinterpret_cast<const float4*>(a_src) : zero;
            const float4 vb = b_ok ? *reinterpret_cast<const float4*>(b_src) : zero;
            ra[0] = va.x; ra[1] = va.y; ra[2] = va.z; ra[3] = va.w;
            rb[0] = vb.x; rb[1] = vb.y; rb[2] = vb.z; rb[3] = vb.w;
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                ra[j] = (g_a_row < m && k0 + a_col + j < k) ? a_src[j] : 0.0f;
                rb[j] = (k0 + b_row < k && g_b_col + j < n) ? b_src[j] : 0.0f;
            }
        }
        a_src += BK;
        b_src += b_step;
    };
    auto store_shared = [&](int s) {
#pragma unroll
        for (int j = 0; j < 4; ++j) As[s][a_col + j][a_row] = ra[j];
        *reinterpret_cast<float4*>(&Bs[s][b_row][b_col]) = make_float4(rb[0], rb[1], rb[2], rb[3]);
    };

    const int k_tiles = (k + BK - 1) / BK;
    if (k_tiles > 0) {
        load_global(0);
        store_shared(0);
    }
    __syncthreads();

    for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt & 1;
        const bool more = kt + 1 < k_tiles;
        if (more) load_global((kt + 1) * BK);  // in flight during the FMAs below

#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            const float4 a0 = *reinterpret_cast<const float4*>(&As[s][kk][ty * 4]);
            const float4 a1 = *reinterpret_cast<const float4*>(&As[s][kk][64 + ty * 4]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[s][kk][tx * 4]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[s][kk][64 + tx * 4]);
            const float av[TM] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float bv[TN] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }

        // The other buffer was last read in step kt-1, which every thread finished before the
        // barrier that ended it; the barrier below makes these stores visible for step kt+1.
        if (more) store_shared(s ^ 1);
        __syncthreads();
    }

    // Store the outputs inside c.
    tile_origin(m, n, block_m, block_n);
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = block_m + (i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4));
        if (row >= m) continue;
        float* c_row = c + (int64_t)row * n;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int col = block_n + h * 64 + tx * 4;
#pragma unroll
            for (int j = 0; j < 4; ++j)
                if (col + j < n) c_row[col + j] = acc[i][h * 4 + j];
        }
    }
}

}  // namespace

extern "C" void solution(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream) {
    if (m <= 0 || n <= 0) return;
    if (k < 0) k = 0;
    const unsigned tiles = (unsigned)(((m + BM - 1) / BM) * ((n + BN - 1) / BN));
    const bool vec = k % 4 == 0 && n % 4 == 0 &&
                     ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b)) & 15) == 0;
    if (vec) sgemm_kernel<true><<<tiles, THREADS, 0, stream>>>(a, b, c, m, n, k);
    else sgemm_kernel<false><<<tiles, THREADS, 0, stream>>>(a, b, c, m, n, k);
}
