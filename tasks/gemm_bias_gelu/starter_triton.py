import torch
import triton
import triton.language as tl


@triton.jit
def gemm_bias_gelu_kernel(a_ptr, w_ptr, bias_ptr, out_ptr, m, n, k,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # Program (i, j) computes the BLOCK_M x BLOCK_N tile of out at block row i, block column j:
    # a tiled GEMM along k, then bias and GELU on the float32 accumulator before the one store.
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)  # accumulate in float32, not bfloat16
    for k0 in range(0, k, BLOCK_K):
        kk = k0 + rk
        # Out-of-range rows, columns and k entries load as 0, which adds nothing to the sum.
        a = tl.load(a_ptr + rm[:, None] * k + kk[None, :], mask=(rm[:, None] < m) & (kk[None, :] < k), other=0.0)
        w = tl.load(w_ptr + kk[:, None] * n + rn[None, :], mask=(kk[:, None] < k) & (rn[None, :] < n), other=0.0)
        acc += tl.dot(a, w)
    # The epilogue, on the accumulator in registers: h = acc + bias, then tanh-GELU.
    h = acc + tl.load(bias_ptr + rn, mask=rn < n, other=0.0).to(tl.float32)[None, :]
    u = 0.7978845608028654 * (h + 0.044715 * h * h * h)  # sqrt(2/pi) * (h + 0.044715 h^3)
    tanh_u = 2.0 / (1.0 + tl.exp(-2.0 * u)) - 1.0
    out = 0.5 * h * (1.0 + tanh_u)
    tl.store(out_ptr + rm[:, None] * n + rn[None, :], out.to(tl.bfloat16), mask=(rm[:, None] < m) & (rn[None, :] < n))


def solution(a: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    (m, k), n = a.shape, w.shape[1]
    out = torch.empty((m, n), device=a.device, dtype=torch.bfloat16)
    BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
    gemm_bias_gelu_kernel[grid](a, w, bias, out, m, n, k, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
    return out
