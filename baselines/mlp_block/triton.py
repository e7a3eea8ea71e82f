# Baseline: the MLP block as two tuned GEMMs with fused epilogues.
#   1. h = gelu_tanh(x @ w1 + b1): bias and GELU on the float32 accumulator tile, one bf16 store.
#   2. y = h @ w2 + b2: bias in the epilogue.
# h makes exactly one round trip through DRAM (4 * tokens * d_ff bytes), a few percent of the
# GEMM time at the benchmark sizes; eager PyTorch makes four such trips plus three extra kernels.
# Each GEMM is a grouped-order tl.dot kernel (wgmma with a cp.async ring on Hopper), one config per size
# class rather than autotuned: the judge runs each step in a fresh process with an empty Triton cache, where
# a sweep of 7 configs at every new (m, n, k) cost 10-20 s a case (issue 14).
import os

import torch
import triton
import triton.language as tl

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


def _config(m: int, n: int) -> tuple[int, int, int, int, int]:
    """BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages for an (m, n) output."""
    if INTERPRET:
        return 64, 64, 64, 4, 1  # the interpreter runs tiles as numpy calls: one small config
    if triton.cdiv(m, 128) * triton.cdiv(n, 256) >= 128:
        # Large GEMMs on Hopper (at least about a wave of tiles on 132 SMs): two warpgroups of 64x256
        # wgmma, 3 stages of 48 KB.
        return 128, 256, 64, 8, 3
    return 64, 128, 64, 4, 4  # small or odd sizes: more tiles, so every SM gets work


def _align(args):
    # Eight bf16 values are one 16-byte vector. k and n are not specialised (below), so Triton sees none of
    # their divisibility: say explicitly when they are multiples of 8 (keeps the loads vectorised).
    return 8 if args["k"] % 8 == 0 and args["n"] % 8 == 0 else 1


@triton.jit
def _gelu_tanh(v):
    # 0.5 * (1 + tanh(u)) = 1 / (1 + exp(-2u)), so gelu(v) = v / (1 + 2^(-2u log2 e)) with
    # u = sqrt(2/pi) (v + 0.044715 v^3). The exponent is clamped so it never overflows; where the
    # clamp acts, v / 2^80 is the 0 the reference gives too.
    t = -2.302208198144325 * (v + 0.044715 * v * v * v)  # -2 * sqrt(2/pi) * log2(e) * (...)
    return v / (1.0 + tl.exp2(tl.minimum(t, 80.0)))


# m, n and k are not specialised (Triton would compile apart values of 1 and multiples of 16, a variant
# per combination): ALIGN states the divisibility of k and n that vector loads need, and m only bounds masks.
@triton.heuristics({"ALIGN": _align})
@triton.jit(do_not_specialize=["m", "n", "k"])
def linear_kernel(a_ptr, w_ptr, bias_ptr, out_ptr, m, n, k, GELU: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                  ALIGN: tl.constexpr):
    # out = act(a @ w + bias), a (m, k), w (k, n), out (m, n), all row-major bf16.
    k, n = k // ALIGN * ALIGN, n // ALIGN * ALIGN  # the same values, with their divisibility visible
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(m, BLOCK_M)
    tiles_n = tl.cdiv(n, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    group_rows = tl.minimum(tiles_m - first_m, GROUP_M)  # the last group may be short
    pid_m = first_m + (pid % per_group) % group_rows
    pid_n = (pid % per_group) // group_rows

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm.to(tl.int64)[:, None] * k + rk[None, :]
    w_ptrs = w_ptr + rk.to(tl.int64)[:, None] * n + rn[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, k, BLOCK_K):
        # Zero-filled edges add nothing to the dot product, so any m, n, k works.
        a = tl.load(a_ptrs, mask=(rm[:, None] < m) & (rk[None, :] < k - k0), other=0.0)
        w = tl.load(w_ptrs, mask=(rk[:, None] < k - k0) & (rn[None, :] < n), other=0.0)
        acc = tl.dot(a, w, acc)
        a_ptrs += BLOCK_K
        w_ptrs += BLOCK_K * n

    # Epilogue on the float32 tile in registers.
    v = acc + tl.load(bias_ptr + rn, mask=rn < n, other=0.0).to(tl.float32)[None, :]
    if GELU:
        v = _gelu_tanh(v)
    out_ptrs = out_ptr + rm.to(tl.int64)[:, None] * n + rn[None, :]
    tl.store(out_ptrs, v.to(tl.bfloat16), mask=(rm[:, None] < m) & (rn[None, :] < n))


def _linear(a: torch.Tensor, w: torch.Tensor, bias: torch.Tensor, gelu: bool) -> torch.Tensor:
    (m, k), n = a.shape, w.shape[1]
    out = torch.empty((m, n), device=a.device, dtype=torch.bfloat16)
    if m == 0 or n == 0:
        return out

    block_m, block_n, block_k, warps, stages = _config(m, n)
    linear_kernel[(triton.cdiv(m, block_m) * triton.cdiv(n, block_n),)](
        a, w, bias, out, m, n, k, GELU=gelu, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=8,
        num_warps=warps, num_stages=stages)
    return out


def solution(x, w1, b1, w2, b2):
    h = _linear(x, w1, b1, gelu=True)  # (tokens, d_ff) bf16: the one intermediate in DRAM
    return _linear(h, w2, b2, gelu=False)
