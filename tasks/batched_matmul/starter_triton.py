import torch
import triton
import triton.language as tl


@triton.jit
def bmm_kernel(a_ptr, b_ptr, c_ptr, m, n, k,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # Program (i, j, z) computes the BLOCK_M x BLOCK_N tile of c[z] at block row i, block column j.
    # a[z] is m x k, b[z] is k x n, c[z] is m x n, all row-major and packed one after another.
    z = tl.program_id(2).to(tl.int64)  # int64: batch * m * k can pass 2**31
    a_ptr += z * m * k
    b_ptr += z * k * n
    c_ptr += z * m * n
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
    (batch, m, k), n = a.shape, b.shape[2]
    c = torch.empty((batch, m, n), device=a.device, dtype=a.dtype)
    BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N), batch)
    bmm_kernel[grid](a, b, c, m, n, k, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
    return c
