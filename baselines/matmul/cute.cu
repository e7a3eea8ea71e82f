// Baseline in CuTe: c = a @ b in bf16 on tensor cores (SM80 mma.sync atoms,
// float32 accumulators), for row-major a (m x k), b (k x n), c (m x n).
//
// Block tile 128x256x64, 8 warps in a 2x4 TiledMMA of 16x8x16 atoms (each warp
// owns 64x64 of c), a 4-stage cp.async ring in shared memory (192 KiB, one block
// per SM), ldmatrix from swizzled shared layouts into the MMA fragments (the
// transposing ldmatrix for b, which is n-major in memory). Blocks run in groups
// of 8 tile-rows so that concurrent blocks reuse tiles of a and b in L2.
//
// Edges are masked with identity tensors partitioned exactly like the data.
// With k % 8 == 0 and n % 8 == 0 (16-byte aligned rows), a 16-byte copy vector
// is wholly inside or outside the matrix: inside it is a cp.async, outside the
// shared vector is cleared. Other shapes run the same kernel with a plain
// per-element guarded copy instead (slower, but only small odd shapes use it).
// Outputs past m or n are computed from zeros and never stored.
#include <cute/tensor.hpp>

using namespace cute;

namespace kd_gemm {

using T = cute::bfloat16_t;
constexpr int kBM = 128, kBN = 256, kBK = 64, kStages = 4, kThreads = 256, kGroupM = 8;

// a tiles are k-major with 64-element (128-byte) rows: Swizzle<3,3,3> XORs the 16-byte
// chunk index with bits of the row so that the 8 rows an ldmatrix reads hit 8 different
// bank groups. b tiles are n-major, 64-element rows, Swizzle<3,3,3> likewise.
static_assert(kBK == 64, "the a swizzle assumes 128-byte rows");
using SmemLayoutA = decltype(tile_to_shape(composition(Swizzle<3, 3, 3>{}, Layout<Shape<_8, _64>, Stride<_64, _1>>{}),
                                           Shape<Int<kBM>, Int<kBK>, Int<kStages>>{}));
using SmemLayoutB = decltype(tile_to_shape(composition(Swizzle<3, 3, 3>{}, Layout<Shape<_64, _8>, Stride<_1, _64>>{}),
                                           Shape<Int<kBN>, Int<kBK>, Int<kStages>>{}));
constexpr int kSmemBytes = (cosize_v<SmemLayoutA> + cosize_v<SmemLayoutB>) * sizeof(T);   // 192 KiB

// 2x4 warps of 16x8x16 atoms. The 64-wide n extent repeats the warp grid twice along n per
// step, so each warp holds two 8-wide b atoms (x two k halves): the four 8x8 matrices that
// one transposing ldmatrix.x4 (SM75_U16x8_LDSM_T) delivers.
using TiledMma = TiledMMA<MMA_Atom<SM80_16x8x16_F32BF16BF16F32_TN>, Layout<Shape<_2, _4, _1>>, Tile<_32, _64, _16>>;

// Global -> shared: 16-byte cp.async per thread, threads laid out along each matrix's
// contiguous direction (k for a, n for b) so that a warp reads whole 128-byte lines.
using GmemCopyA = decltype(make_tiled_copy(Copy_Atom<SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>, T>{},
                                           Layout<Shape<Int<kThreads * 8 / kBK>, Int<kBK / 8>>, Stride<Int<kBK / 8>, _1>>{},
                                           Layout<Shape<_1, _8>>{}));
using GmemCopyB = decltype(make_tiled_copy(Copy_Atom<SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>, T>{},
                                           Layout<Shape<Int<kBN / 8>, Int<kThreads * 8 / kBN>>, Stride<_1, Int<kBN / 8>>>{},
                                           Layout<Shape<_8, _1>>{}));
using SmemCopyA = Copy_Atom<SM75_U32x4_LDSM_N, T>;
using SmemCopyB = Copy_Atom<SM75_U16x8_LDSM_T, T>;

template <bool kAligned>
static __global__ void __launch_bounds__(kThreads, 1) gemm_kernel(const T* a, const T* b, T* c, int m, int n, int k) {
    // C(M,N) = A(M,K) * B(N,K)^T in CuTe's convention; b (k x n, row-major) is B with n-stride 1.
    Tensor mA = make_tensor(make_gmem_ptr(a), make_shape(m, k), make_stride(k, Int<1>{}));
    Tensor mB = make_tensor(make_gmem_ptr(b), make_shape(n, k), make_stride(Int<1>{}, n));
    Tensor mC = make_tensor(make_gmem_ptr(c), make_shape(m, n), make_stride(n, Int<1>{}));

    // Grouped tile order: kGroupM tile-rows advance together along n.
    const int tiles_m = (m + kBM - 1) / kBM, tiles_n = (n + kBN - 1) / kBN;
    const int per_group = kGroupM * tiles_n, pid = blockIdx.x;
    const int first_m = (pid / per_group) * kGroupM;
    const int group_rows = min(tiles_m - first_m, kGroupM);
    const int tile_m = first_m + (pid % per_group) % group_rows, tile_n = (pid % per_group) / group_rows;

    auto tiler = make_shape(Int<kBM>{}, Int<kBN>{}, Int<kBK>{});
    auto coord = make_coord(tile_m, tile_n, _);
    Tensor gA = local_tile(mA, tiler, coord, Step<_1, X, _1>{});   // (BM,BK,k_tiles)
    Tensor gB = local_tile(mB, tiler, coord, Step<X, _1, _1>{});   // (BN,BK,k_tiles)
    Tensor gC = local_tile(mC, tiler, coord, Step<_1, _1, X>{});   // (BM,BN)
    // Same tiles of identity tensors: each element is its own (row, col) in the full matrix.
    Tensor cA = local_tile(make_identity_tensor(shape(mA)), tiler, coord, Step<_1, X, _1>{});
    Tensor cB = local_tile(make_identity_tensor(shape(mB)), tiler, coord, Step<X, _1, _1>{});
    Tensor cC = local_tile(make_identity_tensor(shape(mC)), tiler, coord, Step<_1, _1, X>{});

    extern __shared__ __align__(128) unsigned char smem[];
    Tensor sA = make_tensor(make_smem_ptr(reinterpret_cast<T*>(smem)), SmemLayoutA{});                 // (BM,BK,S)
    Tensor sB = make_tensor(make_smem_ptr(reinterpret_cast<T*>(smem) + cosize_v<SmemLayoutA>), SmemLayoutB{});

    GmemCopyA gcopy_a;
    GmemCopyB gcopy_b;
    auto gthr_a = gcopy_a.get_slice(threadIdx.x);
    auto gthr_b = gcopy_b.get_slice(threadIdx.x);
    Tensor tAgA = gthr_a.partition_S(gA);   // (CPY,CPY_M,CPY_K,k_tiles), CPY = 8 elements
    Tensor tAcA = gthr_a.partition_S(cA);
    Tensor tAsA = gthr_a.partition_D(sA);   // (CPY,CPY_M,CPY_K,S)
    Tensor tBgB = gthr_b.partition_S(gB);
    Tensor tBcB = gthr_b.partition_S(cB);
    Tensor tBsB = gthr_b.partition_D(sB);

    // One k-tile into one stage, masked against the matrix bounds.
    auto load_stage = [&](int kt, int s) {
        if constexpr (kAligned) {   // whole 16-byte vectors: cp.async if inside, else zeros
            CUTE_UNROLL
            for (int i = 0; i < size<1>(tAsA); ++i)
                CUTE_UNROLL
                for (int j = 0; j < size<2>(tAsA); ++j) {
                    if (elem_less(tAcA(0, i, j, kt), shape(mA))) copy(gcopy_a, tAgA(_, i, j, kt), tAsA(_, i, j, s));
                    else clear(tAsA(_, i, j, s));
                }
            CUTE_UNROLL
            for (int i = 0; i < size<1>(tBsB); ++i)
                CUTE_UNROLL
                for (int j = 0; j < size<2>(tBsB); ++j) {
                    if (elem_less(tBcB(0, i, j, kt), shape(mB))) copy(gcopy_b, tBgB(_, i, j, kt), tBsB(_, i, j, s));
                    else clear(tBsB(_, i, j, s));
                }
        } else {   // element by element; not unrolled, to keep registers for the accumulators
            Tensor sAs = tAsA(_, _, _, s);
            Tensor sBs = tBsB(_, _, _, s);
#pragma unroll 1
            for (int e = 0; e < size(sAs); ++e)
                sAs(e) = elem_less(tAcA(_, _, _, kt)(e), shape(mA)) ? tAgA(_, _, _, kt)(e) : T(0.0f);
#pragma unroll 1
            for (int e = 0; e < size(sBs); ++e)
                sBs(e) = elem_less(tBcB(_, _, _, kt)(e), shape(mB)) ? tBgB(_, _, _, kt)(e) : T(0.0f);
        }
    };

    TiledMma mma;
    auto thr_mma = mma.get_slice(threadIdx.x);
    Tensor tCrA = thr_mma.partition_fragment_A(sA(_, _, 0));   // (MMA,MMA_M,MMA_K) registers
    Tensor tCrB = thr_mma.partition_fragment_B(sB(_, _, 0));   // (MMA,MMA_N,MMA_K)
    Tensor tCgC = thr_mma.partition_C(gC);                     // (MMA,MMA_M,MMA_N)
    Tensor tCcC = thr_mma.partition_C(cC);
    Tensor acc = partition_fragment_C(mma, Shape<Int<kBM>, Int<kBN>>{});
    clear(acc);

    // Shared -> registers through ldmatrix, retiled to match the MMA fragments.
    auto scopy_a = make_tiled_copy_A(SmemCopyA{}, mma);
    auto scopy_b = make_tiled_copy_B(SmemCopyB{}, mma);
    auto sthr_a = scopy_a.get_slice(threadIdx.x);
    auto sthr_b = scopy_b.get_slice(threadIdx.x);
    Tensor tXsA = sthr_a.partition_S(sA);   // (CPY,CPY_M,CPY_K,S)
    Tensor tXrA = sthr_a.retile_D(tCrA);
    Tensor tXsB = sthr_b.partition_S(sB);
    Tensor tXrB = sthr_b.retile_D(tCrB);

    const int k_tiles = size<3>(tAgA);
    // Prologue: kStages-1 tiles in flight. Groups are committed even when empty so that
    // "all but the newest kStages-2 groups done" always means "tile kt has landed".
    CUTE_UNROLL
    for (int s = 0; s < kStages - 1; ++s) {
        if (s < k_tiles) load_stage(s, s);
        cp_async_fence();
    }

    for (int kt = 0; kt < k_tiles; ++kt) {
        cp_async_wait<kStages - 2>();
        // Tile kt is visible to all; everyone is done with tile kt-1, whose stage is refilled next.
        __syncthreads();
        if (kt + kStages - 1 < k_tiles) load_stage(kt + kStages - 1, (kt + kStages - 1) % kStages);
        cp_async_fence();

        const int s = kt % kStages;
        CUTE_UNROLL
        for (int kb = 0; kb < size<2>(tCrA); ++kb) {
            copy(scopy_a, tXsA(_, _, kb, s), tXrA(_, _, kb));
            copy(scopy_b, tXsB(_, _, kb, s), tXrB(_, _, kb));
            gemm(mma, tCrA(_, _, kb), tCrB(_, _, kb), acc);
        }
    }

    // Store the outputs that lie inside c.
    CUTE_UNROLL
    for (int i = 0; i < size(acc); ++i)
        if (elem_less(tCcC(i), shape(mC))) tCgC(i) = T(acc(i));
}

template <bool kAligned>
static void launch(const T* a, const T* b, T* c, int m, int n, int k, cudaStream_t stream) {
    static bool configured = false;   // unlock more than 48 KiB of dynamic shared memory, once
    if (!configured) {
        cudaFuncSetAttribute(gemm_kernel<kAligned>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
        configured = true;
    }
    const int tiles = ((m + kBM - 1) / kBM) * ((n + kBN - 1) / kBN);
    gemm_kernel<kAligned><<<tiles, kThreads, kSmemBytes, stream>>>(a, b, c, m, n, k);
}

}  // namespace kd_gemm

using namespace kd_gemm;

extern "C" void solution(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c, int m, int n, int k,
                         cudaStream_t stream) {
    if (m <= 0 || n <= 0) return;
    if (k < 0) k = 0;
    const T* ta = reinterpret_cast<const T*>(a);
    const T* tb = reinterpret_cast<const T*>(b);
    T* tc = reinterpret_cast<T*>(c);
    const bool aligned = k % 8 == 0 && n % 8 == 0 &&
                         ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b)) & 15) == 0;
    if (aligned) launch<true>(ta, tb, tc, m, n, k, stream);
    else launch<false>(ta, tb, tc, m, n, k, stream);
}
