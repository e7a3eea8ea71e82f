# Baseline: one pre-LN transformer block in seven launches, each tuned for Hopper.
#   LN1 -> QKV GEMM -> flash attention -> WO GEMM (+ x) -> LN2 -> W1 GEMM (+ b1, GELU) -> W2 GEMM (+ b2, + h)
# - LayerNorm: one program per row, the row held in registers (d <= 4096), two-pass variance.
# - GEMMs: one grouped-order tl.dot kernel (wgmma + cp.async ring on Hopper) whose epilogue
#   optionally adds a bias, applies tanh-GELU and adds a residual on the float32 tile, then stores once.
# - Configs are chosen per size class, not autotuned: the judge runs each step in a fresh process with an
#   empty Triton cache, where a sweep compiles and times every config at every new shape (issue 14).
# - Attention: flash attention forward with an online softmax in the exp2 domain. q, k and v are read
#   straight out of the (tokens, 3d) qkv matrix with strides, and o is written in (tokens, d) order,
#   so the heads never get permuted or copied. Key blocks entirely below the diagonal run unmasked,
#   blocks above it are skipped, and the longest query blocks are launched first.
import math
import os

import torch
import triton
import triton.language as tl

HEAD_DIM = 64
EPS = 1e-5
INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


# ----------------------------------------------------------------------------------------------- LayerNorm
@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, d, eps, BLOCK_D: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < d
    x = tl.load(x_ptr + row * d + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / d
    diff = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(diff * diff, axis=0) / d + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * d + cols, (diff * rstd * w + b).to(tl.bfloat16), mask=mask)


def _layernorm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    rows, d = x.shape
    out = torch.empty_like(x)
    # Every d up to 1024 gets the same 1024-wide block (masked lanes cost little): each width is a compile.
    block = max(1024, triton.next_power_of_2(d))
    warps = 1 if INTERPRET else max(1, min(16, block // 256))
    layernorm_kernel[(rows,)](x, w, b, out, d, EPS, BLOCK_D=block, num_warps=warps)
    return out


# ----------------------------------------------------------------------------------------------- GEMM
def _gemm_config(m: int, n: int) -> tuple[int, int, int, int, int]:
    """BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages for an (m, n) output."""
    if INTERPRET:
        return 64, 64, 64, 4, 1
    if triton.cdiv(m, 128) * triton.cdiv(n, 256) >= 128:
        return 128, 256, 64, 8, 3  # two warpgroups of 64x256 wgmma: at least about a wave of tiles on 132 SMs
    return 64, 128, 64, 4, 4  # narrow or short GEMMs (the output projection at small d): more tiles


def _align(args):
    # Eight bf16 values make a 16-byte vector; tell the compiler when k and n allow it.
    return 8 if args["k"] % 8 == 0 and args["n"] % 8 == 0 else 1


@triton.jit
def _gelu_tanh(v):
    # gelu(v) = v / (1 + exp(-2u)), u = sqrt(2/pi) (v + 0.044715 v^3); exponent clamped against overflow.
    t = -2.302208198144325 * (v + 0.044715 * v * v * v)  # -2 * sqrt(2/pi) * log2(e) * (...)
    return v / (1.0 + tl.exp2(tl.minimum(t, 80.0)))


# m (the token count) is not specialised: Triton would compile apart m == 1 and m % 16 == 0, and m only bounds
# masks. n and k (multiples of 64 here) keep their specialisation.
@triton.heuristics({"ALIGN": _align})
@triton.jit(do_not_specialize=["m"])
def linear_kernel(a_ptr, w_ptr, bias_ptr, res_ptr, out_ptr, m, n, k,
                  HAS_BIAS: tl.constexpr, GELU: tl.constexpr, HAS_RES: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                  ALIGN: tl.constexpr):
    # out = act(a @ w + bias) + res; a (m, k), w (k, n), res and out (m, n), all row-major bf16.
    k, n = k // ALIGN * ALIGN, n // ALIGN * ALIGN  # same values, divisibility made visible
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(m, BLOCK_M)
    tiles_n = tl.cdiv(n, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    group_rows = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_rows
    pid_n = (pid % per_group) // group_rows

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm.to(tl.int64)[:, None] * k + rk[None, :]
    w_ptrs = w_ptr + rk.to(tl.int64)[:, None] * n + rn[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, k, BLOCK_K):
        a = tl.load(a_ptrs, mask=(rm[:, None] < m) & (rk[None, :] < k - k0), other=0.0)
        w = tl.load(w_ptrs, mask=(rk[:, None] < k - k0) & (rn[None, :] < n), other=0.0)
        acc = tl.dot(a, w, acc)
        a_ptrs += BLOCK_K
        w_ptrs += BLOCK_K * n

    mask = (rm[:, None] < m) & (rn[None, :] < n)
    offs = rm.to(tl.int64)[:, None] * n + rn[None, :]
    if HAS_BIAS:
        acc += tl.load(bias_ptr + rn, mask=rn < n, other=0.0).to(tl.float32)[None, :]
    if GELU:
        acc = _gelu_tanh(acc)
    if HAS_RES:
        acc += tl.load(res_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, acc.to(tl.bfloat16), mask=mask)


def _linear(a, w, bias=None, res=None, gelu=False):
    (m, k), n = a.shape, w.shape[1]
    out = torch.empty((m, n), device=a.device, dtype=torch.bfloat16)

    block_m, block_n, block_k, warps, stages = _gemm_config(m, n)
    # Unused pointer arguments get `a`; the constexpr flags keep the kernel from touching them.
    linear_kernel[(triton.cdiv(m, block_m) * triton.cdiv(n, block_n),)](
        a, w, a if bias is None else bias, a if res is None else res, out, m, n, k,
        HAS_BIAS=bias is not None, GELU=gelu, HAS_RES=res is not None,
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=8, num_warps=warps, num_stages=stages)
    return out


# ----------------------------------------------------------------------------------------------- attention
def _attn_config(seq: int) -> tuple[int, int, int, int]:
    """BLOCK_M, BLOCK_N, num_warps, num_stages for a sequence length."""
    if INTERPRET:
        return 64, 32, 4, 1
    if seq < 512:
        return 64, 64, 4, 3  # short sequences: 64-row query blocks make twice the programs
    return 128, 64, 8, 3


@triton.jit
def _attn_block(acc, l_i, m_i, q, k_ptrs, v_ptrs, rm, n0, seq, qk_scale,
                BLOCK_N: tl.constexpr, MASKED: tl.constexpr):
    # One block of keys/values starting at n0: scores, online-softmax update, P @ V.
    rn = n0 + tl.arange(0, BLOCK_N)
    # (HEAD_DIM, BLOCK_N); blocks wholly inside the sequence load without a mask
    k = tl.load(k_ptrs, mask=rn[None, :] < seq, other=0.0) if MASKED else tl.load(k_ptrs)
    s = tl.dot(q, k) * qk_scale                                                # log2-domain scores
    if MASKED:
        s = tl.where((rm[:, None] >= rn[None, :]) & (rn[None, :] < seq), s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    p = tl.exp2(s - m_new[:, None])
    alpha = tl.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, axis=1)
    v = tl.load(v_ptrs, mask=rn[:, None] < seq, other=0.0) if MASKED else tl.load(v_ptrs)  # (BLOCK_N, HEAD_DIM)
    acc = acc * alpha[:, None] + tl.dot(p.to(tl.bfloat16), v)
    return acc, l_i, m_new


# seq and heads are not specialised (Triton would compile apart values of 1 and multiples of 16): they only
# enter index arithmetic, loop bounds and masks. d stays specialised: the rows' stride 3d must be seen to be a
# multiple of 16 for vector loads.
@triton.jit(do_not_specialize=["seq", "heads"])
def attention_kernel(qkv_ptr, o_ptr, seq, heads, d, qk_scale,
                     HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    tl.static_assert(BLOCK_M % BLOCK_N == 0)
    # Longest query blocks (the bottom of the causal triangle) first, so the tail of the grid is short.
    pid_m = tl.num_programs(0) - 1 - tl.program_id(0)
    bh = tl.program_id(1)
    b, h = bh // heads, bh % heads
    row_stride = 3 * d
    base = qkv_ptr + (b * seq).to(tl.int64) * row_stride + h * HEAD_DIM
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, HEAD_DIM)
    rn0 = tl.arange(0, BLOCK_N)
    q = tl.load(base + rm[:, None] * row_stride + rd[None, :], mask=rm[:, None] < seq, other=0.0)
    k_ptrs = base + d + rn0[None, :] * row_stride + rd[:, None]          # k^T block: (HEAD_DIM, BLOCK_N)
    v_ptrs = base + 2 * d + rn0[:, None] * row_stride + rd[None, :]      # v block: (BLOCK_N, HEAD_DIM)

    m_i = tl.zeros((BLOCK_M,), dtype=tl.float32) - float("inf")
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
    # Keys [0, pid_m * BLOCK_M) lie below the diagonal for every row of this block (and inside seq).
    full_end = pid_m * BLOCK_M
    for n0 in range(0, full_end, BLOCK_N):
        acc, l_i, m_i = _attn_block(acc, l_i, m_i, q, k_ptrs + n0 * row_stride, v_ptrs + n0 * row_stride,
                                    rm, n0, seq, qk_scale, BLOCK_N, False)
    # The diagonal block(s): causal and sequence-end masks.
    diag_end = tl.minimum((pid_m + 1) * BLOCK_M, seq)
    for n0 in range(full_end, diag_end, BLOCK_N):
        acc, l_i, m_i = _attn_block(acc, l_i, m_i, q, k_ptrs + n0 * row_stride, v_ptrs + n0 * row_stride,
                                    rm, n0, seq, qk_scale, BLOCK_N, True)
    o = acc / l_i[:, None]
    o_ptrs = o_ptr + (b * seq + rm).to(tl.int64)[:, None] * d + h * HEAD_DIM + rd[None, :]
    tl.store(o_ptrs, o.to(tl.bfloat16), mask=rm[:, None] < seq)


def _attention(qkv: torch.Tensor, batch: int, seq: int, heads: int) -> torch.Tensor:
    d = heads * HEAD_DIM
    o = torch.empty((batch * seq, d), device=qkv.device, dtype=torch.bfloat16)
    qk_scale = HEAD_DIM**-0.5 * math.log2(math.e)  # softmax in base 2: exp(x) = exp2(x * log2 e)

    block_m, block_n, warps, stages = _attn_config(seq)
    attention_kernel[(triton.cdiv(seq, block_m), batch * heads)](
        qkv, o, seq, heads, d, qk_scale, HEAD_DIM=HEAD_DIM, BLOCK_M=block_m, BLOCK_N=block_n,
        num_warps=warps, num_stages=stages)
    return o


# ----------------------------------------------------------------------------------------------- the block
def solution(x, ln1_weight, ln1_bias, wqkv, wo, ln2_weight, ln2_bias, w1, b1, w2, b2):
    batch, seq, d = x.shape
    heads = d // HEAD_DIM
    xs = x.reshape(batch * seq, d)
    qkv = _linear(_layernorm(xs, ln1_weight, ln1_bias), wqkv)              # (tokens, 3d)
    h = _linear(_attention(qkv, batch, seq, heads), wo, res=xs)            # x + attention
    f = _linear(_layernorm(h, ln2_weight, ln2_bias), w1, bias=b1, gelu=True)
    return _linear(f, w2, bias=b2, res=h).view(batch, seq, d)             # h + MLP
