# Starter: the block as simple, untuned kernels: a LayerNorm per row, one plain tiled GEMM with
# optional bias / GELU / residual, and attention computed one query row per program (an online
# softmax over blocks of keys, with the dot products as elementwise products and sums, so no
# tensor cores there). Correct at any size; the fast path is in the prompt.
import torch
import triton
import triton.language as tl

HEAD_DIM = 64


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, d, eps, BLOCK_D: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < d
    x = tl.load(x_ptr + row * d + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / d
    diff = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(diff * diff, axis=0) / d + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * d + cols, (diff * rstd * w + b).to(tl.bfloat16), mask=mask)


@triton.jit
def linear_kernel(a_ptr, w_ptr, bias_ptr, res_ptr, out_ptr, m, n, k,
                  HAS_BIAS: tl.constexpr, GELU: tl.constexpr, HAS_RES: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # out = act(a @ w + bias) + res, all row-major; a (m, k), w (k, n), res and out (m, n).
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, k, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * k + kk[None, :], mask=(rm[:, None] < m) & (kk[None, :] < k), other=0.0)
        w = tl.load(w_ptr + kk[:, None] * n + rn[None, :], mask=(kk[:, None] < k) & (rn[None, :] < n), other=0.0)
        acc += tl.dot(a, w)
    mask = (rm[:, None] < m) & (rn[None, :] < n)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + rn, mask=rn < n, other=0.0).to(tl.float32)[None, :]
    if GELU:
        u = 0.7978845608028654 * (acc + 0.044715 * acc * acc * acc)
        acc = 0.5 * acc * (1.0 + (2.0 / (1.0 + tl.exp(-2.0 * u)) - 1.0))
    if HAS_RES:
        acc += tl.load(res_ptr + rm[:, None] * n + rn[None, :], mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + rm[:, None] * n + rn[None, :], acc.to(tl.bfloat16), mask=mask)


@triton.jit
def attention_row_kernel(qkv_ptr, o_ptr, seq, heads, d, scale,
                         HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr):
    # One query row i of one (batch, head): o_i = sum_j softmax_j(q_i . k_j * scale) v_j, j <= i.
    i = tl.program_id(0)
    bh = tl.program_id(1)
    b, h = bh // heads, bh % heads
    row_stride = 3 * d
    base = qkv_ptr + b * seq * row_stride + h * HEAD_DIM
    dims = tl.arange(0, HEAD_DIM)
    q = tl.load(base + i * row_stride + dims).to(tl.float32)
    m_i = -float("inf")
    l_i = 0.0
    acc = tl.zeros((HEAD_DIM,), dtype=tl.float32)
    for j0 in range(0, i + 1, BLOCK_N):
        js = j0 + tl.arange(0, BLOCK_N)
        valid = js <= i
        k = tl.load(base + d + js[:, None] * row_stride + dims[None, :], mask=valid[:, None], other=0.0)
        s = tl.sum(k.to(tl.float32) * q[None, :], axis=1) * scale
        s = tl.where(valid, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=0))
        p = tl.exp(s - m_new)
        alpha = tl.exp(m_i - m_new)
        v = tl.load(base + 2 * d + js[:, None] * row_stride + dims[None, :], mask=valid[:, None], other=0.0)
        acc = acc * alpha + tl.sum(p[:, None] * v.to(tl.float32), axis=0)
        l_i = l_i * alpha + tl.sum(p, axis=0)
        m_i = m_new
    tl.store(o_ptr + (b * seq + i) * d + h * HEAD_DIM + dims, (acc / l_i).to(tl.bfloat16))


def _layernorm(x, w, b):
    rows, d = x.shape
    out = torch.empty_like(x)
    layernorm_kernel[(rows,)](x, w, b, out, d, 1e-5, BLOCK_D=triton.next_power_of_2(d))
    return out


def _linear(a, w, bias=None, res=None, gelu=False):
    (m, k), n = a.shape, w.shape[1]
    out = torch.empty((m, n), device=a.device, dtype=torch.bfloat16)
    grid = (triton.cdiv(m, 64), triton.cdiv(n, 64))
    linear_kernel[grid](a, w, bias if bias is not None else a, res if res is not None else a, out, m, n, k,
                        HAS_BIAS=bias is not None, GELU=gelu, HAS_RES=res is not None,
                        BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)
    return out


def solution(x, ln1_weight, ln1_bias, wqkv, wo, ln2_weight, ln2_bias, w1, b1, w2, b2):
    batch, seq, d = x.shape
    heads = d // HEAD_DIM
    xs = x.reshape(batch * seq, d)
    qkv = _linear(_layernorm(xs, ln1_weight, ln1_bias), wqkv)          # (tokens, 3d)
    o = torch.empty((batch * seq, d), device=x.device, dtype=torch.bfloat16)
    attention_row_kernel[(seq, batch * heads)](qkv, o, seq, heads, d, HEAD_DIM**-0.5,
                                               HEAD_DIM=HEAD_DIM, BLOCK_N=32)
    h = _linear(o, wo, res=xs)                                         # x + attention
    f = _linear(_layernorm(h, ln2_weight, ln2_bias), w1, bias=b1, gelu=True)
    return _linear(f, w2, bias=b2, res=h).view(batch, seq, d)         # h + MLP
