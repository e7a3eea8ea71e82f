// Starter in CuTe: c = a @ b^T with a (m x k) and b (n x k) both row-major (K-major), float32
// accumulation on CUDA cores. Each block stages a 32x32 tile of a and of b in shared memory per
// k-step; each of its 256 threads then owns 4 outputs. Correct at any m, n, k, but it uses no
// tensor cores, no asynchronous copies and no pipelining. The fast path on Hopper: wgmma atoms
// reading swizzled shared tiles that TMA fills, several stages deep.
#include <cute/tensor.hpp>

using namespace cute;
using bf16 = __nv_bfloat16;

constexpr int kTile = 32, kThreads = 256;

// `static` keeps the kernel private to this library (another loaded library may use the name).
static __global__ void __launch_bounds__(kThreads) gemm_tn_kernel(const bf16* a, const bf16* b, bf16* c,
                                                                  int m, int n, int k) {
    // CuTe's GEMM convention C(M,N) = A(M,K) * B(N,K)^T matches the task: both are (rows, k).
    Tensor mA = make_tensor(make_gmem_ptr(a), make_shape(m, k), make_stride(k, Int<1>{}));
    Tensor mB = make_tensor(make_gmem_ptr(b), make_shape(n, k), make_stride(k, Int<1>{}));
    Tensor mC = make_tensor(make_gmem_ptr(c), make_shape(m, n), make_stride(n, Int<1>{}));
    // Coordinate tensors: element (i, j) holds (i, j), so a thread can test whether it is inside.
    Tensor cA = make_identity_tensor(shape(mA));
    Tensor cB = make_identity_tensor(shape(mB));
    Tensor cC = make_identity_tensor(shape(mC));

    auto tiler = make_shape(Int<kTile>{}, Int<kTile>{}, Int<kTile>{});
    auto coord = make_coord(blockIdx.y, blockIdx.x, _);
    Tensor gA = local_tile(mA, tiler, coord, Step<_1, X, _1>{});    // (32, 32, k_tiles)
    Tensor gB = local_tile(mB, tiler, coord, Step<X, _1, _1>{});    // (32, 32, k_tiles)
    Tensor gC = local_tile(mC, tiler, coord, Step<_1, _1, X>{});    // (32, 32)
    Tensor tileA = local_tile(cA, tiler, coord, Step<_1, X, _1>{});
    Tensor tileB = local_tile(cB, tiler, coord, Step<X, _1, _1>{});
    Tensor tileC = local_tile(cC, tiler, coord, Step<_1, _1, X>{});

    // Shared tiles in float, padded by one column so threads reading down a column of k do not
    // all land in one bank.
    auto smem_layout = make_layout(make_shape(Int<kTile>{}, Int<kTile>{}), make_stride(Int<kTile + 1>{}, Int<1>{}));
    __shared__ float smem_a[cosize_v<decltype(smem_layout)>], smem_b[cosize_v<decltype(smem_layout)>];
    Tensor sA = make_tensor(make_smem_ptr(smem_a), smem_layout);
    Tensor sB = make_tensor(make_smem_ptr(smem_b), smem_layout);

    // Loading: 8 rows x 32 threads, consecutive threads along k (the contiguous direction).
    auto load_layout = make_layout(make_shape(Int<8>{}, Int<32>{}), LayoutRight{});
    Tensor tAgA = local_partition(gA, load_layout, threadIdx.x);   // (4, 1, k_tiles)
    Tensor tAcA = local_partition(tileA, load_layout, threadIdx.x);
    Tensor tAsA = local_partition(sA, load_layout, threadIdx.x);   // (4, 1)
    Tensor tBgB = local_partition(gB, load_layout, threadIdx.x);
    Tensor tBcB = local_partition(tileB, load_layout, threadIdx.x);
    Tensor tBsB = local_partition(sB, load_layout, threadIdx.x);

    // Computing: a 16 x 16 grid of threads, each owning the 2 x 2 outputs strided by 16.
    auto thread_grid = make_layout(make_shape(Int<16>{}, Int<16>{}), LayoutRight{});
    Tensor tCsA = local_partition(sA, thread_grid, threadIdx.x, Step<_1, X>{});   // (2, 32): my rows
    Tensor tCsB = local_partition(sB, thread_grid, threadIdx.x, Step<X, _1>{});   // (2, 32): my columns
    Tensor tCgC = local_partition(gC, thread_grid, threadIdx.x);                  // (2, 2)
    Tensor tCcC = local_partition(tileC, thread_grid, threadIdx.x);
    Tensor acc = make_tensor<float>(shape(tCgC));
    clear(acc);

    for (int kt = 0; kt < size<2>(gA); ++kt) {
        for (int i = 0; i < size(tAsA); ++i)   // outside the matrix: 0, which adds nothing
            tAsA(i) = elem_less(tAcA(_, _, kt)(i), shape(mA)) ? __bfloat162float(tAgA(_, _, kt)(i)) : 0.0f;
        for (int i = 0; i < size(tBsB); ++i)
            tBsB(i) = elem_less(tBcB(_, _, kt)(i), shape(mB)) ? __bfloat162float(tBgB(_, _, kt)(i)) : 0.0f;
        __syncthreads();
        for (int kk = 0; kk < kTile; ++kk)
            for (int i = 0; i < size<0>(acc); ++i)
                for (int j = 0; j < size<1>(acc); ++j) acc(i, j) += tCsA(i, kk) * tCsB(j, kk);
        __syncthreads();
    }
    for (int i = 0; i < size(acc); ++i)
        if (elem_less(tCcC(i), shape(mC))) tCgC(i) = __float2bfloat16(acc(i));
}

extern "C" void solution(const bf16* a, const bf16* b, bf16* c, int m, int n, int k, cudaStream_t stream) {
    if (m <= 0 || n <= 0) return;
    dim3 grid((n + kTile - 1) / kTile, (m + kTile - 1) / kTile);
    gemm_tn_kernel<<<grid, kThreads, 0, stream>>>(a, b, c, m, n, k < 0 ? 0 : k);
}
