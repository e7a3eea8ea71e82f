import torch
import triton
import triton.language as tl


@triton.jit
def fp8_gemm_kernel(a_ptr, b_ptr, sa_ptr, sb_ptr, c_ptr, m, n, k,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # Program (i, j) computes the BLOCK_M x BLOCK_N tile of c at block row i, block column j.
    # a is (m, k) and b is (n, k), both row-major fp8; c = scale_a * scale_b * (a @ b^T) in bf16.
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, k, BLOCK_K):
        kk = k0 + rk
        # Out-of-range rows, columns and k entries load as 0, which adds nothing to the sum.
        a = tl.load(a_ptr + rm[:, None] * k + kk[None, :], mask=(rm[:, None] < m) & (kk[None, :] < k), other=0.0)
        b = tl.load(b_ptr + rn[:, None] * k + kk[None, :], mask=(rn[:, None] < n) & (kk[None, :] < k), other=0.0)
        acc += tl.dot(a, tl.trans(b))  # fp8 x fp8 -> float32 on the tensor cores
    c = acc * (tl.load(sa_ptr) * tl.load(sb_ptr))
    tl.store(c_ptr + rm[:, None] * n + rn[None, :], c.to(tl.bfloat16), mask=(rm[:, None] < m) & (rn[None, :] < n))


def solution(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor) -> torch.Tensor:
    (m, k), n = a.shape, b.shape[0]
    c = torch.empty((m, n), device=a.device, dtype=torch.bfloat16)
    BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 64
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
    fp8_gemm_kernel[grid](a, b, scale_a, scale_b, c, m, n, k, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
    return c
