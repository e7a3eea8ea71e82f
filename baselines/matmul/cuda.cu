// Baseline: c = a @ b in bf16 on tensor cores (mma.sync m16n8k16, float32
// accumulators), for row-major a (m x k), b (k x n), c (m x n).
//
// Block tile 128x256, k-step 64, 8 warps as 2 (m) x 4 (n), each warp a 64x64
// tile = 4x8 mma tiles. Large warp tiles mean fewer shared-memory reads per mma,
// and shared-memory bandwidth is what limits mma.sync kernels on Hopper. Tiles
// of a and b go global -> shared with cp.async in a 4-stage ring (192 KiB, one
// block per SM), so the loads for step kt+3 fly while step kt computes; shared
// -> registers with ldmatrix (.trans for b, which is k-major in memory but must
// be n-major in the fragment). Shared rows are XOR-swizzled in 16-byte chunks so
// that both the cp.async writes and the ldmatrix reads are free of bank
// conflicts. Blocks are ordered in groups of 8 tile-rows so that concurrent
// blocks share tiles of a and b in L2. (The next step up on Hopper is wgmma fed
// by TMA, which reads operands straight from shared memory.)
//
// Edges: cp.async moves 16-byte chunks (8 elements) and zero-fills chunks that
// lie outside the matrix; that needs every row of a and b to start 16-byte
// aligned, i.e. k % 8 == 0 and n % 8 == 0. Other shapes take the same kernel
// with ALIGNED = false, which loads element by element with bounds checks
// (slower, but those shapes are small in practice). Zeros past k add nothing to
// the dot products; outputs past m or n are computed but never stored.
#include <cstdint>

namespace {

constexpr int BM = 128, BN = 256, BK = 64, STAGES = 4, THREADS = 256, MIN_BLOCKS = 1;
constexpr int WARPS_N = 4, WM = BM / (THREADS / 32 / WARPS_N), WN = BN / WARPS_N;  // 2 x 4 warps
constexpr int MT = WM / 16, NT = WN / 8;                // mma tiles per warp
constexpr int A_STAGE = BM * BK, B_STAGE = BK * BN;     // elements per stage
constexpr int SMEM_BYTES = STAGES * (A_STAGE + B_STAGE) * 2;
constexpr int A_LOADS = BM * BK / 8 / THREADS, B_LOADS = BK * BN / 8 / THREADS;  // 16-byte chunks per thread
constexpr int GROUP_M = 8;
static_assert(BK == 64 && BN % 64 == 0 && NT % 2 == 0, "the swizzle and ldmatrix.x4 assume these");

// Offset (in elements) of 16-byte chunk `ch` of tile row `r`. Rows are at least 128 bytes,
// so the 8 rows that one ldmatrix matrix reads would all start in the same bank; XORing the
// chunk index with r % 8 spreads them (and a warp's cp.async writes) over all 32 banks.
__device__ __forceinline__ int a_off(int r, int ch) { return r * BK + ((ch ^ (r & 7)) << 3); }
__device__ __forceinline__ int b_off(int r, int ch) { return r * BN + ((ch ^ (r & 7)) << 3); }

__device__ __forceinline__ uint32_t smem_addr(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool pred) {
    // src-size 0 reads nothing and fills the 16 bytes with zeros.
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(pred ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Eight consecutive elements of one row, zero where col >= limit (the unaligned path).
__device__ __forceinline__ uint4 load8_guarded(const __nv_bfloat16* row, int col, int limit, bool row_ok) {
    union { uint4 u; __nv_bfloat16 h[8]; } v;
#pragma unroll
    for (int e = 0; e < 8; ++e) v.h[e] = (row_ok && col + e < limit) ? row[col + e] : __float2bfloat16(0.0f);
    return v.u;
}

// One k-step of a (BM x BK) and b (BK x BN) into a stage, in 16-byte chunks.
template <bool ALIGNED>
__device__ __forceinline__ void load_stage(__nv_bfloat16* sA, __nv_bfloat16* sB, const __nv_bfloat16* a,
                                           const __nv_bfloat16* b, int m, int n, int k, int bm, int bn, int k0) {
    if constexpr (ALIGNED) {
#pragma unroll
        for (int j = 0; j < A_LOADS; ++j) {
            const int id = threadIdx.x + j * THREADS, r = id / (BK / 8), ch = id % (BK / 8);
            const int gr = bm + r, gc = k0 + ch * 8;
            const bool ok = gr < m && gc < k;   // k % 8 == 0: a chunk is all in or all out
            cp_async16(smem_addr(sA + a_off(r, ch)), ok ? a + (int64_t)gr * k + gc : a, ok);
        }
#pragma unroll
        for (int j = 0; j < B_LOADS; ++j) {
            const int id = threadIdx.x + j * THREADS, r = id / (BN / 8), ch = id % (BN / 8);
            const int gr = k0 + r, gc = bn + ch * 8;
            const bool ok = gr < k && gc < n;
            cp_async16(smem_addr(sB + b_off(r, ch)), ok ? b + (int64_t)gr * n + gc : b, ok);
        }
    } else {
        // The same chunks element by element. Not unrolled: with every chunk's loads in
        // flight at once, registers would overflow next to the accumulators.
#pragma unroll 1
        for (int j = 0; j < A_LOADS; ++j) {
            const int id = threadIdx.x + j * THREADS, r = id / (BK / 8), ch = id % (BK / 8);
            const int gr = bm + r;
            *reinterpret_cast<uint4*>(sA + a_off(r, ch)) = load8_guarded(a + (int64_t)gr * k, k0 + ch * 8, k, gr < m);
        }
#pragma unroll 1
        for (int j = 0; j < B_LOADS; ++j) {
            const int id = threadIdx.x + j * THREADS, r = id / (BN / 8), ch = id % (BN / 8);
            const int gr = k0 + r;
            *reinterpret_cast<uint4*>(sB + b_off(r, ch)) = load8_guarded(b + (int64_t)gr * n, bn + ch * 8, n, gr < k);
        }
    }
}

template <bool ALIGNED>
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
gemm_bf16(const __nv_bfloat16* __restrict__ a, const __nv_bfloat16* __restrict__ b, __nv_bfloat16* __restrict__ c,
          int m, int n, int k, bool pair_store) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    __nv_bfloat16* sA = reinterpret_cast<__nv_bfloat16*>(smem_raw);
    __nv_bfloat16* sB = sA + STAGES * A_STAGE;

    // Grouped tile order: GROUP_M tile-rows advance together along n.
    const int tiles_m = (m + BM - 1) / BM, tiles_n = (n + BN - 1) / BN;
    const int pid = blockIdx.x, per_group = GROUP_M * tiles_n;
    const int first_m = (pid / per_group) * GROUP_M;
    const int group_rows = min(tiles_m - first_m, GROUP_M);
    const int bm = (first_m + (pid % per_group) % group_rows) * BM;
    const int bn = ((pid % per_group) / group_rows) * BN;

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm = (warp / WARPS_N) * WM, wn = (warp % WARPS_N) * WN;

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

    const int ktiles = (k + BK - 1) / BK;
    // Prologue: the first STAGES-1 k-steps. A group is committed even when empty so that
    // the wait count below always means "k-step kt has landed".
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < ktiles) load_stage<ALIGNED>(sA + s * A_STAGE, sB + s * B_STAGE, a, b, m, n, k, bm, bn, s * BK);
        cp_async_commit();
    }

    for (int kt = 0; kt < ktiles; ++kt) {
        cp_async_wait<STAGES - 2>();
        // Makes step kt visible to all warps, and ensures everyone has finished step kt-1,
        // whose stage the prefetch below overwrites.
        __syncthreads();
        const int pf = kt + STAGES - 1;
        if (pf < ktiles) {
            const int s = pf % STAGES;
            load_stage<ALIGNED>(sA + s * A_STAGE, sB + s * B_STAGE, a, b, m, n, k, bm, bn, pf * BK);
        }
        cp_async_commit();

        const __nv_bfloat16* tA = sA + (kt % STAGES) * A_STAGE;
        const __nv_bfloat16* tB = sB + (kt % STAGES) * B_STAGE;
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
            uint32_t af[MT][4], bfr[NT][2];
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                // Lanes 0-15 address rows 0-15 at k 0-7, lanes 16-31 the same rows at k 8-15:
                // the four 8x8 matrices come back as the a0..a3 registers of the mma fragment.
                const int r = wm + i * 16 + (lane & 15);
                ldmatrix_x4(af[i], smem_addr(tA + a_off(r, kk * 2 + (lane >> 4))));
            }
#pragma unroll
            for (int j = 0; j < NT / 2; ++j) {
                // Rows are k: lanes 0-15 give k 0-15 at n 0-7, lanes 16-31 k 0-15 at n 8-15.
                // Transposed, that is (b0, b1) for n-tile 2j, then (b0, b1) for n-tile 2j+1.
                const int r = kk * 16 + (lane & 15);
                uint32_t t[4];
                ldmatrix_x4_trans(t, smem_addr(tB + b_off(r, (wn + j * 16) / 8 + (lane >> 4))));
                bfr[2 * j][0] = t[0]; bfr[2 * j][1] = t[1];
                bfr[2 * j + 1][0] = t[2]; bfr[2 * j + 1][1] = t[3];
            }
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int j = 0; j < NT; ++j) mma_bf16(acc[i][j], af[i], bfr[j][0], bfr[j][1]);
        }
    }

    // Accumulator fragment: lane holds (row lane/4, cols 2*(lane%4) + {0,1}) and the same
    // columns 8 rows further down. Store what lies inside c, in pairs when alignment allows.
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            const int col = bn + wn + j * 8 + (lane & 3) * 2;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = bm + wm + i * 16 + (lane >> 2) + h * 8;
                if (row >= m) continue;
                __nv_bfloat16* p = c + (int64_t)row * n + col;
                const float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
                if (pair_store && col + 1 < n) {
                    *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(v0, v1);
                } else {
                    if (col < n) p[0] = __float2bfloat16(v0);
                    if (col + 1 < n) p[1] = __float2bfloat16(v1);
                }
            }
        }
    }
}

template <bool ALIGNED>
void launch(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c, int m, int n, int k, bool pair_store,
            cudaStream_t stream) {
    static bool configured = false;  // more than 48 KiB of shared memory must be unlocked, once per kernel
    if (!configured) {
        cudaFuncSetAttribute(gemm_bf16<ALIGNED>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
        configured = true;
    }
    const int tiles = ((m + BM - 1) / BM) * ((n + BN - 1) / BN);
    gemm_bf16<ALIGNED><<<tiles, THREADS, SMEM_BYTES, stream>>>(a, b, c, m, n, k, pair_store);
}

}  // namespace

extern "C" void solution(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c, int m, int n, int k,
                         cudaStream_t stream) {
    if (m <= 0 || n <= 0) return;
    if (k < 0) k = 0;
    const bool aligned = k % 8 == 0 && n % 8 == 0 &&
                         ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b)) & 15) == 0;
    // A pair (col, col+1) with col even is 4-byte aligned when n is even and c is.
    const bool pair_store = n % 2 == 0 && (reinterpret_cast<uintptr_t>(c) & 3) == 0;
    if (aligned) launch<true>(a, b, c, m, n, k, pair_store, stream);
    else launch<false>(a, b, c, m, n, k, pair_store, stream);
}
