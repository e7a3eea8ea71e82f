// Starter in CuTe: c = a @ b with CUDA-core FMAs, a float32 accumulator and
// shared-memory tiles. It shows the CuTe vocabulary the fast version builds
// on: tensors as (pointer, layout), local_tile to cut out a block's tile,
// local_partition to split a tile among threads, and identity tensors to mask
// the edges. Correct at any m, n, k. Next steps toward speed: tensor-core MMA
// atoms (make_tiled_mma), cp.async copies, and a multi-stage pipeline.
#include <cute/tensor.hpp>

using namespace cute;
using bf16 = __nv_bfloat16;

constexpr int kBM = 64, kBN = 64, kBK = 16, kThreads = 256;

// `static` keeps the kernel's symbol private to this library: two libraries loaded into one
// process that both define a kernel of the same name could otherwise launch each other's.
static __global__ void __launch_bounds__(kThreads) gemm_kernel(const bf16* a, const bf16* b, bf16* c, int m, int n, int k) {
    // CuTe's GEMM convention is C(M,N) = A(M,K) * B(N,K)^T. b is stored k x n row-major,
    // so viewed as an (N,K) tensor its n-stride is 1 and its k-stride is n.
    Tensor mA = make_tensor(make_gmem_ptr(a), make_shape(m, k), make_stride(k, Int<1>{}));
    Tensor mB = make_tensor(make_gmem_ptr(b), make_shape(n, k), make_stride(Int<1>{}, n));
    Tensor mC = make_tensor(make_gmem_ptr(c), make_shape(m, n), make_stride(n, Int<1>{}));

    // Identity tensors hold each element's own (row, col) coordinate. Tiled and partitioned
    // exactly like the data, they tell a thread whether its element lies inside the matrix.
    Tensor idA = make_identity_tensor(shape(mA));
    Tensor idB = make_identity_tensor(shape(mB));
    Tensor idC = make_identity_tensor(shape(mC));

    // This block's tiles. The Step picks which tiler modes apply to which tensor; the last
    // mode of gA/gB runs over the ceil(k/BK) tiles along k. Edge tiles reach past the matrix:
    // that is only pointer arithmetic until something is loaded, and the masks below stop that.
    auto tiler = make_shape(Int<kBM>{}, Int<kBN>{}, Int<kBK>{});
    auto coord = make_coord(blockIdx.x, blockIdx.y, _);
    Tensor gA = local_tile(mA, tiler, coord, Step<_1, X, _1>{});   // (BM,BK,k_tiles)
    Tensor gB = local_tile(mB, tiler, coord, Step<X, _1, _1>{});   // (BN,BK,k_tiles)
    Tensor gC = local_tile(mC, tiler, coord, Step<_1, _1, X>{});   // (BM,BN)
    Tensor cA = local_tile(idA, tiler, coord, Step<_1, X, _1>{});
    Tensor cB = local_tile(idB, tiler, coord, Step<X, _1, _1>{});
    Tensor cC = local_tile(idC, tiler, coord, Step<_1, _1, X>{});

    // Shared tiles, converted to float once on the way in. Both are M/N-major so that the
    // compute loop's neighbouring threads read neighbouring words; A's k-stride is padded
    // to BM+1 because the copy below writes it along k, which would otherwise hit one bank.
    auto layoutA = make_layout(make_shape(Int<kBM>{}, Int<kBK>{}), make_stride(Int<1>{}, Int<kBM + 1>{}));
    auto layoutB = make_layout(make_shape(Int<kBN>{}, Int<kBK>{}));
    __shared__ float smemA[cosize_v<decltype(layoutA)>], smemB[cosize_v<decltype(layoutB)>];
    Tensor sA = make_tensor(make_smem_ptr(smemA), layoutA);
    Tensor sB = make_tensor(make_smem_ptr(smemB), layoutB);

    // Copy layouts: 16x16 threads, with consecutive threads along the contiguous direction
    // of each global matrix (k for a, n for b) so that the loads coalesce.
    auto tA = make_layout(make_shape(Int<16>{}, Int<16>{}), LayoutRight{});
    auto tB = make_layout(make_shape(Int<16>{}, Int<16>{}));
    Tensor tAgA = local_partition(gA, tA, threadIdx.x);   // (4,1,k_tiles)
    Tensor tAcA = local_partition(cA, tA, threadIdx.x);
    Tensor tAsA = local_partition(sA, tA, threadIdx.x);   // (4,1)
    Tensor tBgB = local_partition(gB, tB, threadIdx.x);   // (4,1,k_tiles)
    Tensor tBcB = local_partition(cB, tB, threadIdx.x);
    Tensor tBsB = local_partition(sB, tB, threadIdx.x);

    // Compute layout: a 16x16 grid of threads, each owning a 4x4 set of outputs strided by 16.
    auto tC = make_layout(make_shape(Int<16>{}, Int<16>{}));
    Tensor tCsA = local_partition(sA, tC, threadIdx.x, Step<_1, X>{});   // (4,BK): my rows of A
    Tensor tCsB = local_partition(sB, tC, threadIdx.x, Step<X, _1>{});   // (4,BK): my cols of B
    Tensor tCgC = local_partition(gC, tC, threadIdx.x, Step<_1, _1>{});  // (4,4)
    Tensor tCcC = local_partition(cC, tC, threadIdx.x, Step<_1, _1>{});
    Tensor acc = make_tensor<float>(shape(tCgC));
    clear(acc);

    const int k_tiles = size<2>(gA);
    for (int kt = 0; kt < k_tiles; ++kt) {
        // Out-of-range elements become 0, which adds nothing to the dot products.
        for (int i = 0; i < size(tAsA); ++i) {
            if (elem_less(tAcA(_, _, kt)(i), shape(mA))) tAsA(i) = __bfloat162float(tAgA(_, _, kt)(i));
            else tAsA(i) = 0.0f;
        }
        for (int i = 0; i < size(tBsB); ++i) {
            if (elem_less(tBcB(_, _, kt)(i), shape(mB))) tBsB(i) = __bfloat162float(tBgB(_, _, kt)(i));
            else tBsB(i) = 0.0f;
        }
        __syncthreads();   // the tile is complete before anyone reads it

        for (int kk = 0; kk < kBK; ++kk)
            for (int i = 0; i < size<0>(acc); ++i)
                for (int j = 0; j < size<1>(acc); ++j)
                    acc(i, j) += tCsA(i, kk) * tCsB(j, kk);
        __syncthreads();   // everyone is done reading before the next tile overwrites it
    }

    // Write only the outputs inside c; the edge tiles' other accumulators are never stored.
    for (int i = 0; i < size(acc); ++i)
        if (elem_less(tCcC(i), shape(mC))) tCgC(i) = __float2bfloat16(acc(i));
}

extern "C" void solution(const bf16* a, const bf16* b, bf16* c, int m, int n, int k, cudaStream_t stream) {
    if (m <= 0 || n <= 0) return;
    dim3 grid((m + kBM - 1) / kBM, (n + kBN - 1) / kBN);
    gemm_kernel<<<grid, kThreads, 0, stream>>>(a, b, c, m, n, k);
}
