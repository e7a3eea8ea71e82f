"""Honest: two outputs that are two halves of one allocation (one `torch.empty`, two views).

Fused residual add + LayerNorm, written the way a kernel author saves an allocation: one
(2, rows, cols) buffer, `h` in the first half and `y` in the second, returned as `buf[0], buf[1]`.
The outputs share a storage but not a byte, and neither touches an input: aliasing is decided by
memory ranges, so this must not count as aliasing (or as an output that is a view of something it
should not be). One program per row sweeps it three times (h and its mean, the variance, the norm).

task: add_layernorm
language: triton
modes: cpu gpu
"""

import torch
import triton
import triton.language as tl

EPS = 1e-5


@triton.jit
def add_layernorm(x, r, w, b, h, y, cols, eps, BLOCK: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * cols
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < cols
        v = tl.load(x + base + offs, mask=mask, other=0.0) + tl.load(r + base + offs, mask=mask, other=0.0)
        tl.store(h + base + offs, v, mask=mask)  # rounded to x's dtype, as the reference's h is
        acc += v.to(tl.float32)
    mean = tl.sum(acc, axis=0) / cols
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        d = tl.where(offs < cols, tl.load(h + base + offs, mask=offs < cols, other=0.0).to(tl.float32) - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / cols + eps)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < cols
        v = (tl.load(h + base + offs, mask=mask, other=0.0).to(tl.float32) - mean) * rstd
        v = v * tl.load(w + offs, mask=mask, other=0.0).to(tl.float32) + tl.load(b + offs, mask=mask, other=0.0)
        tl.store(y + base + offs, v.to(y.dtype.element_ty), mask=mask)


def solution(x, residual, weight, bias):
    rows, cols = x.shape
    buf = torch.empty(2, rows, cols, device=x.device, dtype=x.dtype)
    h, y = buf[0], buf[1]
    add_layernorm[(rows,)](x, residual, weight, bias, h, y, cols, EPS, BLOCK=1024)
    return h, y
