"""Honest: several kernels per call, with scratch buffers between them.

Softmax in three passes, each its own kernel: the row maxima into a scratch vector, the row sums
of exp(x - max) into another, then the normalisation. Slower than a fused kernel, correct.

task: softmax
language: triton
modes: cpu gpu
"""

import torch
import triton
import triton.language as tl


@triton.jit
def row_max(x, mx, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    best = tl.full((BLOCK,), float("-inf"), tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(x + row * cols + offs, mask=offs < cols, other=float("-inf")).to(tl.float32)
        best = tl.maximum(best, v)
    tl.store(mx + row, tl.max(best, axis=0))


@triton.jit
def row_sum_exp(x, mx, sm, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = tl.load(mx + row)
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(x + row * cols + offs, mask=offs < cols, other=float("-inf")).to(tl.float32)
        acc += tl.exp(v - m)
    tl.store(sm + row, tl.sum(acc, axis=0))


@triton.jit
def normalise(x, mx, sm, out, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m, s = tl.load(mx + row), tl.load(sm + row)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(x + row * cols + offs, mask=offs < cols, other=0.0).to(tl.float32)
        tl.store(out + row * cols + offs, (tl.exp(v - m) / s).to(out.dtype.element_ty), mask=offs < cols)


def solution(x):
    rows, cols = x.shape
    mx = torch.empty(rows, device=x.device, dtype=torch.float32)
    sm = torch.empty(rows, device=x.device, dtype=torch.float32)
    out = torch.empty_like(x)
    block = min(1024, triton.next_power_of_2(cols))
    row_max[(rows,)](x, mx, cols, BLOCK=block)
    row_sum_exp[(rows,)](x, mx, sm, cols, BLOCK=block)
    normalise[(rows,)](x, mx, sm, out, cols, BLOCK=block)
    return out
