"""Honest: tensor cores (tl.dot on bfloat16 tiles, float32 accumulation), within tolerance.

A plain tiled GEMM whose products run on tensor cores: bfloat16 in, float32 accumulate, one
rounding to bfloat16 at the end, as the task asks. Its rounding differs from cuBLAS's in the last
bit, which the task's tolerance allows.

task: matmul
language: triton
modes: cpu gpu
"""

import torch
import triton
import triton.language as tl


@triton.jit
def gemm(a, b, c, m, n, k, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, k, BK):
        ta = tl.load(a + rm[:, None] * k + (k0 + rk)[None, :], mask=(rm[:, None] < m) & ((k0 + rk)[None, :] < k),
                     other=0.0)
        tb = tl.load(b + (k0 + rk)[:, None] * n + rn[None, :], mask=((k0 + rk)[:, None] < k) & (rn[None, :] < n),
                     other=0.0)
        acc += tl.dot(ta, tb)
    tl.store(c + rm[:, None] * n + rn[None, :], acc.to(tl.bfloat16), mask=(rm[:, None] < m) & (rn[None, :] < n))


def solution(a, b):
    (m, k), n = a.shape, b.shape[1]
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    gemm[(triton.cdiv(m, 64), triton.cdiv(n, 64))](a, b, c, m, n, k, BM=64, BN=64, BK=32)
    return c
