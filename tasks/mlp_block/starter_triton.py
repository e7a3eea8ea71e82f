import torch
import triton
import triton.language as tl


@triton.jit
def linear_kernel(a_ptr, w_ptr, bias_ptr, out_ptr, m, n, k, GELU: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # out = act(a @ w + bias) for row-major a (m, k), w (k, n), bias (n,); act is tanh-GELU when
    # GELU is set. Program (i, j) computes the BLOCK_M x BLOCK_N tile at block row i, column j.
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, k, BLOCK_K):
        kk = k0 + rk
        # Out-of-range rows, columns and k entries load as 0, which adds nothing to the sum.
        a = tl.load(a_ptr + rm[:, None] * k + kk[None, :], mask=(rm[:, None] < m) & (kk[None, :] < k), other=0.0)
        w = tl.load(w_ptr + kk[:, None] * n + rn[None, :], mask=(kk[:, None] < k) & (rn[None, :] < n), other=0.0)
        acc += tl.dot(a, w)
    v = acc + tl.load(bias_ptr + rn, mask=rn < n, other=0.0).to(tl.float32)[None, :]
    if GELU:
        u = 0.7978845608028654 * (v + 0.044715 * v * v * v)  # sqrt(2/pi) * (v + 0.044715 v^3)
        v = 0.5 * v * (1.0 + (2.0 / (1.0 + tl.exp(-2.0 * u)) - 1.0))  # tanh(u) = 2 / (1 + e^(-2u)) - 1
    tl.store(out_ptr + rm[:, None] * n + rn[None, :], v.to(tl.bfloat16), mask=(rm[:, None] < m) & (rn[None, :] < n))


def _linear(a, w, bias, gelu):
    (m, k), n = a.shape, w.shape[1]
    out = torch.empty((m, n), device=a.device, dtype=torch.bfloat16)
    grid = (triton.cdiv(m, 64), triton.cdiv(n, 64))
    linear_kernel[grid](a, w, bias, out, m, n, k, GELU=gelu, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)
    return out


def solution(x, w1, b1, w2, b2):
    # Two launches of one plain tiled GEMM: h = gelu(x @ w1 + b1) in bf16, then y = h @ w2 + b2.
    h = _linear(x, w1, b1, gelu=True)
    return _linear(h, w2, b2, gelu=False)
