import torch
import triton
import triton.language as tl


@triton.jit
def int8_gemm_kernel(a_ptr, b_ptr, sa_ptr, sb_ptr, out_ptr, m, n, k,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # Program (i, j) computes the BLOCK_M x BLOCK_N tile of out at block row i, block column j,
    # walking along k one BLOCK_K slice at a time with an exact int32 accumulator, then scales it.
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    for k0 in range(0, k, BLOCK_K):
        kk = k0 + rk
        # Out-of-range rows, columns and k entries load as 0, which adds nothing to the sum.
        a = tl.load(a_ptr + rm[:, None] * k + kk[None, :], mask=(rm[:, None] < m) & (kk[None, :] < k), other=0)
        b = tl.load(b_ptr + kk[:, None] * n + rn[None, :], mask=(kk[:, None] < k) & (rn[None, :] < n), other=0)
        acc = tl.dot(a, b, acc, out_dtype=tl.int32)  # int8 x int8 -> int32
    sa = tl.load(sa_ptr + rm, mask=rm < m, other=0.0)
    sb = tl.load(sb_ptr + rn, mask=rn < n, other=0.0)
    out = acc.to(tl.float32) * sa[:, None] * sb[None, :]
    tl.store(out_ptr + rm[:, None] * n + rn[None, :], out.to(tl.bfloat16), mask=(rm[:, None] < m) & (rn[None, :] < n))


def solution(a: torch.Tensor, b: torch.Tensor, sa: torch.Tensor, sb: torch.Tensor) -> torch.Tensor:
    (m, k), n = a.shape, b.shape[1]
    out = torch.empty((m, n), device=a.device, dtype=torch.bfloat16)
    BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
    int8_gemm_kernel[grid](a, b, sa, sb, out, m, n, k, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
    return out
