"""Honest: a multi-output solution (a tuple of two tensors from one fused kernel).

Fused residual add + LayerNorm: one program per row computes h = x + residual, rounds it to x's
dtype (as the reference does before the norm), writes it, and normalises it in float32, sweeping
the row in chunks.

task: add_layernorm
language: triton
modes: cpu gpu
"""

import torch
import triton
import triton.language as tl


@triton.jit
def add_layernorm(x, res, w, b, h_out, y_out, cols, eps, BLOCK: tl.constexpr):
    # Three sweeps over the row in BLOCK-wide chunks (a row of 65537 in one block would take
    # Triton minutes to compile): h and its sum, then the variance around the mean, then y.
    row = tl.program_id(0).to(tl.int64) * cols
    total = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < cols
        xv = tl.load(x + row + offs, mask=mask, other=0.0).to(tl.float32)
        h = (xv + tl.load(res + row + offs, mask=mask, other=0.0).to(tl.float32)).to(h_out.dtype.element_ty)
        tl.store(h_out + row + offs, h, mask=mask)
        total += tl.where(mask, h.to(tl.float32), 0.0)
    mean = tl.sum(total, axis=0) / cols
    squares = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < cols
        d = tl.where(mask, tl.load(h_out + row + offs, mask=mask, other=0.0).to(tl.float32) - mean, 0.0)
        squares += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(squares, axis=0) / cols + eps)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < cols
        d = tl.load(h_out + row + offs, mask=mask, other=0.0).to(tl.float32) - mean
        wf = tl.load(w + offs, mask=mask, other=0.0).to(tl.float32)
        bf = tl.load(b + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_out + row + offs, (d * rstd * wf + bf).to(y_out.dtype.element_ty), mask=mask)


def solution(x, residual, weight, bias):
    rows, cols = x.shape
    h, y = torch.empty_like(x), torch.empty_like(x)
    block = min(triton.next_power_of_2(cols), 4096)
    add_layernorm[(rows,)](x, residual, weight, bias, h, y, cols, 1e-5, BLOCK=block)
    return h, y
