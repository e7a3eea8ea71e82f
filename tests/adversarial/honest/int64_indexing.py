"""Honest: 64-bit offsets in a kernel written for sizes past 2**31 elements.

GELU (tanh form) with the element offset computed in int64 (`program_id(0).to(tl.int64) * BLOCK`),
the fix for the overflow a kernel hits once `pid * BLOCK` passes 2**31; n is passed as an int64
scalar. Slightly more address arithmetic; same answer. Must not trip any check.

task: gelu
language: triton
modes: cpu gpu
"""

import torch
import triton
import triton.language as tl


@triton.jit
def gelu(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    mask = offs < n
    v = tl.load(x + offs, mask=mask, other=0.0).to(tl.float32)
    inner = 0.7978845608028654 * (v + 0.044715 * v * v * v)
    tanh = 1.0 - 2.0 / (tl.exp(2.0 * inner) + 1.0)
    y = 0.5 * v * (1.0 + tanh)
    tl.store(out + offs, y.to(out.dtype.element_ty), mask=mask)


def solution(x):
    n = x.numel()
    out = torch.empty_like(x)
    gelu[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    return out
