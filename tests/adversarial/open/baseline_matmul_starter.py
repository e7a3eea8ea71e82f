# BASELINE (honest): matmul starter Triton kernel, for comparison.
import torch
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, m, n, k,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # Program (i, j) computes the BLOCK_M x BLOCK_N tile of c at block row i, block column j,
    # walking along k one BLOCK_K slice at a time. a is m x k, b is k x n, c is m x n, all row-major.
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)  # accumulate in float32, not bfloat16
    for k0 in range(0, k, BLOCK_K):
        kk = k0 + rk
        # Out-of-range rows, columns and k entries load as 0, which adds nothing to the sum.
        a = tl.load(a_ptr + rm[:, None] * k + kk[None, :], mask=(rm[:, None] < m) & (kk[None, :] < k), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * n + rn[None, :], mask=(kk[:, None] < k) & (rn[None, :] < n), other=0.0)
        acc += tl.dot(a, b)
    c = acc.to(c_ptr.dtype.element_ty)
    tl.store(c_ptr + rm[:, None] * n + rn[None, :], c, mask=(rm[:, None] < m) & (rn[None, :] < n))


def solution(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    (m, k), n = a.shape, b.shape[1]
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
    matmul_kernel[grid](a, b, c, m, n, k, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
    return c
