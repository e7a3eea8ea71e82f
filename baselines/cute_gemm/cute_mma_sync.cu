// Baseline in CuTe: c = a @ b^T (a: m x k, b: n x k, both row-major / K-major), bf16 in and out,
// float32 accumulators, on Ampere-style tensor-core MMAs (SM80 mma.sync atoms), which run on any
// GPU from sm_80 up. The shipped baseline, cute.cu beside this file, is the wgmma + TMA version for
// Hopper (0.98x cuBLAS at 8192^3 on an H200, where this one reaches 0.48x).
//
// Block tile 128 x 256 x 64 over 8 warps arranged 2 (m) x 4 (n); each warp owns a 64 x 64 piece of
// c, i.e. 4 x 8 MMA atoms of 16 x 8 x 16, so every fragment loaded from shared memory feeds several
// MMAs. A 4-stage ring of shared-memory tiles (4 x 48 KiB) is filled by 16-byte cp.async copies,
// three k-tiles ahead of the math. Both operands are K-major, so both reach the MMA fragments
// through the non-transposing ldmatrix (SM75_U32x4_LDSM_N); the shared tiles are XOR-swizzled
// (Swizzle<3,3,3> on 64-element rows) so that neither the cp.async writes nor the ldmatrix reads
// hit the same bank twice. Blocks are ordered in groups of 8 tile-rows that sweep along n
// together, so a group's panels of a and the current panel of b are shared through L2.
//
// Edges: the data are masked with identity tensors partitioned exactly like the data. When k % 8
// == 0 and a, b are 16-byte aligned, a 16-byte vector along k is wholly inside or outside the
// matrix: inside it is one cp.async, outside the shared vector is cleared. Other shapes use the
// same kernel with element-wise guarded copies (slower; only small odd shapes need it). Outputs
// beyond m or n are computed from zeros and never stored.
#include <cute/tensor.hpp>

using namespace cute;

namespace kd_cute_gemm {

using T = cute::bfloat16_t;
constexpr int kBM = 128, kBN = 256, kBK = 64, kStages = 4, kThreads = 256, kGroupM = 8;

// One 8 x 64 atom: 8 rows of 128 bytes with the 16-byte chunks permuted by the row index.
using SmemAtom = decltype(composition(Swizzle<3, 3, 3>{}, Layout<Shape<_8, Int<kBK>>, Stride<Int<kBK>, _1>>{}));
using SmemLayoutA = decltype(tile_to_shape(SmemAtom{}, Shape<Int<kBM>, Int<kBK>, Int<kStages>>{}));
using SmemLayoutB = decltype(tile_to_shape(SmemAtom{}, Shape<Int<kBN>, Int<kBK>, Int<kStages>>{}));
constexpr int kSmemBytes = int(cosize_v<SmemLayoutA> + cosize_v<SmemLayoutB>) * int(sizeof(T));   // 192 KiB

// Global -> shared: each thread copies 8 consecutive k-elements (16 bytes); 8 threads cover one
// 128-byte row, 32 rows per pass of the block.
using GmemCopy = decltype(make_tiled_copy(Copy_Atom<SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>, T>{},
                                          Layout<Shape<Int<kThreads / 8>, _8>, Stride<_8, _1>>{},
                                          Layout<Shape<_1, _8>>{}));
// 2 x 4 warps of 16 x 8 x 16 atoms; the permutation tile's 64 along n gives each warp two
// neighbouring 8-wide b atoms per step, which is what one ldmatrix.x4 delivers.
using TiledMma = TiledMMA<MMA_Atom<SM80_16x8x16_F32BF16BF16F32_TN>, Layout<Shape<_2, _4, _1>>, Tile<_32, _64, _16>>;
using SmemCopy = Copy_Atom<SM75_U32x4_LDSM_N, T>;

static_assert(kBM * kBK % (kThreads * 8) == 0 && kBN * kBK % (kThreads * 8) == 0, "copy passes must be whole");

// Stores the float accumulators `acc` of this thread to c as bf16, skipping elements outside c.
// Pairs of neighbouring columns go out as one 4-byte store where that is safe.
template <class Acc, class GC, class CC>
__device__ __forceinline__ void store_tile(const Acc& acc, GC& gc, const CC& cc, int m, int n, bool pairs) {
    if (pairs) {
        CUTE_UNROLL
        for (int i = 0; i < size(acc); i += 2) {
            if (get<0>(cc(i)) < m && get<1>(cc(i)) < n) {
                __nv_bfloat162 v = __floats2bfloat162_rn(acc(i), acc(i + 1));
                *reinterpret_cast<__nv_bfloat162*>(&gc(i)) = v;
            }
        }
    } else {
        CUTE_UNROLL
        for (int i = 0; i < size(acc); ++i)
            if (elem_less(cc(i), make_shape(m, n))) gc(i) = T(acc(i));
    }
}

template <bool kAligned>
static __global__ void __launch_bounds__(kThreads, 1)
gemm_tn_kernel(const T* a, const T* b, T* c, int m, int n, int k) {
    Tensor mA = make_tensor(make_gmem_ptr(a), make_shape(m, k), make_stride(k, Int<1>{}));
    Tensor mB = make_tensor(make_gmem_ptr(b), make_shape(n, k), make_stride(k, Int<1>{}));
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
    Tensor cA = local_tile(make_identity_tensor(shape(mA)), tiler, coord, Step<_1, X, _1>{});
    Tensor cB = local_tile(make_identity_tensor(shape(mB)), tiler, coord, Step<X, _1, _1>{});
    Tensor cC = local_tile(make_identity_tensor(shape(mC)), tiler, coord, Step<_1, _1, X>{});

    extern __shared__ __align__(128) unsigned char smem[];
    Tensor sA = make_tensor(make_smem_ptr(reinterpret_cast<T*>(smem)), SmemLayoutA{});   // (BM,BK,S)
    Tensor sB = make_tensor(make_smem_ptr(reinterpret_cast<T*>(smem) + cosize_v<SmemLayoutA>), SmemLayoutB{});

    GmemCopy gcopy;
    auto gthr = gcopy.get_slice(threadIdx.x);
    Tensor tAgA = gthr.partition_S(gA);   // (CPY,CPY_M,CPY_K,k_tiles), CPY = 8 elements
    Tensor tAcA = gthr.partition_S(cA);
    Tensor tAsA = gthr.partition_D(sA);   // (CPY,CPY_M,CPY_K,S)
    Tensor tBgB = gthr.partition_S(gB);
    Tensor tBcB = gthr.partition_S(cB);
    Tensor tBsB = gthr.partition_D(sB);

    // k-tile kt of a and b into stage s, masked against the matrix bounds.
    auto load_stage = [&](int kt, int s) {
        if constexpr (kAligned) {
            CUTE_UNROLL
            for (int i = 0; i < size<1>(tAsA); ++i)
                CUTE_UNROLL
                for (int j = 0; j < size<2>(tAsA); ++j) {
                    if (elem_less(tAcA(0, i, j, kt), shape(mA))) copy(gcopy, tAgA(_, i, j, kt), tAsA(_, i, j, s));
                    else clear(tAsA(_, i, j, s));
                }
            CUTE_UNROLL
            for (int i = 0; i < size<1>(tBsB); ++i)
                CUTE_UNROLL
                for (int j = 0; j < size<2>(tBsB); ++j) {
                    if (elem_less(tBcB(0, i, j, kt), shape(mB))) copy(gcopy, tBgB(_, i, j, kt), tBsB(_, i, j, s));
                    else clear(tBsB(_, i, j, s));
                }
        } else {   // element by element, not unrolled: registers stay with the accumulators
            Tensor dA = tAsA(_, _, _, s);
            Tensor dB = tBsB(_, _, _, s);
            Tensor srcA = tAgA(_, _, _, kt);
            Tensor srcB = tBgB(_, _, _, kt);
            Tensor crdA = tAcA(_, _, _, kt);
            Tensor crdB = tBcB(_, _, _, kt);
#pragma unroll 1
            for (int e = 0; e < size(dA); ++e) dA(e) = elem_less(crdA(e), shape(mA)) ? srcA(e) : T(0.0f);
#pragma unroll 1
            for (int e = 0; e < size(dB); ++e) dB(e) = elem_less(crdB(e), shape(mB)) ? srcB(e) : T(0.0f);
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

    auto scopy_a = make_tiled_copy_A(SmemCopy{}, mma);
    auto scopy_b = make_tiled_copy_B(SmemCopy{}, mma);
    auto sthr_a = scopy_a.get_slice(threadIdx.x);
    auto sthr_b = scopy_b.get_slice(threadIdx.x);
    Tensor tXsA = sthr_a.partition_S(sA);   // (CPY,CPY_M,CPY_K,S)
    Tensor tXrA = sthr_a.retile_D(tCrA);
    Tensor tXsB = sthr_b.partition_S(sB);
    Tensor tXrB = sthr_b.retile_D(tCrB);

    const int k_tiles = size<3>(tAgA);
    // Prologue: kStages-1 tiles in flight. A group is committed even when empty, so "all but the
    // newest kStages-2 groups have landed" always means "tile kt has landed".
    CUTE_UNROLL
    for (int s = 0; s < kStages - 1; ++s) {
        if (s < k_tiles) load_stage(s, s);
        cp_async_fence();
    }

    for (int kt = 0; kt < k_tiles; ++kt) {
        cp_async_wait<kStages - 2>();
        // Tile kt is visible to every thread, and every thread is done with tile kt-1, whose stage
        // is the one refilled now.
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

    // Values 0 and 1 of an SM80 accumulator are neighbouring columns of one row; with n even and
    // the column even, the pair is one aligned 4-byte bf16x2 store.
    const bool pairs = (n % 2 == 0) && get<0>(tCcC(1)) == get<0>(tCcC(0)) && get<1>(tCcC(1)) == get<1>(tCcC(0)) + 1 &&
                       get<1>(tCcC(0)) % 2 == 0 && (reinterpret_cast<uintptr_t>(c) & 3) == 0;
    store_tile(acc, tCgC, tCcC, m, n, pairs);
}

template <bool kAligned>
static void launch(const T* a, const T* b, T* c, int m, int n, int k, cudaStream_t stream) {
    static bool configured = false;   // allow more than 48 KiB of dynamic shared memory, once
    if (!configured) {
        cudaFuncSetAttribute(gemm_tn_kernel<kAligned>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
        configured = true;
    }
    const int tiles = ((m + kBM - 1) / kBM) * ((n + kBN - 1) / kBN);
    gemm_tn_kernel<kAligned><<<tiles, kThreads, kSmemBytes, stream>>>(a, b, c, m, n, k);
}

}  // namespace kd_cute_gemm

extern "C" void solution(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c, int m, int n, int k,
                         cudaStream_t stream) {
    using namespace kd_cute_gemm;
    if (m <= 0 || n <= 0) return;
    if (k < 0) k = 0;
    const T* ta = reinterpret_cast<const T*>(a);
    const T* tb = reinterpret_cast<const T*>(b);
    T* tc = reinterpret_cast<T*>(c);
    const bool aligned = k % 8 == 0 && ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b)) & 15) == 0;
    if (aligned) launch<true>(ta, tb, tc, m, n, k, stream);
    else launch<false>(ta, tb, tc, m, n, k, stream);
}
