"""Honest: in-place work on its own buffer (never on the inputs).

Copies x into a fresh output with one kernel, then applies ReLU to that output in place with a
second kernel (reading and writing the same addresses). In-place updates of the submission's own
memory are fine; the inputs are left untouched.

task: relu
language: triton
modes: cpu gpu
"""

import torch
import triton
import triton.language as tl


@triton.jit
def copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


@triton.jit
def relu_inplace(buf, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(buf + offs, mask=mask).to(tl.float32)
    tl.store(buf + offs, tl.where(v > 0, v, 0.0).to(buf.dtype.element_ty), mask=mask)


def solution(x):
    n = x.numel()
    out = torch.empty_like(x)
    grid = (triton.cdiv(n, 1024),)
    copy[grid](x, out, n, BLOCK=1024)
    relu_inplace[grid](out, n, BLOCK=1024)
    return out
