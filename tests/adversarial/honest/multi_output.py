"""Honest: a multi-output solution (a tuple of two tensors from one fused kernel).

Fused residual add + LayerNorm: one program per row computes h = x + residual, rounds it to x's
dtype (as the reference does before the norm), writes it, and normalises it in float32.

task: add_layernorm
language: triton
modes: cpu gpu
"""

import torch
import triton
import triton.language as tl


@triton.jit
def add_layernorm(x, res, w, b, h_out, y_out, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    xv = tl.load(x + row * cols + offs, mask=mask, other=0.0).to(tl.float32)
    h = (xv + tl.load(res + row * cols + offs, mask=mask, other=0.0).to(tl.float32)).to(h_out.dtype.element_ty)
    tl.store(h_out + row * cols + offs, h, mask=mask)
    hf = h.to(tl.float32)
    mean = tl.sum(hf, axis=0) / cols
    d = tl.where(mask, hf - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / cols + eps)
    wf = tl.load(w + offs, mask=mask, other=0.0).to(tl.float32)
    bf = tl.load(b + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_out + row * cols + offs, (d * rstd * wf + bf).to(y_out.dtype.element_ty), mask=mask)


def solution(x, residual, weight, bias):
    rows, cols = x.shape
    h, y = torch.empty_like(x), torch.empty_like(x)
    add_layernorm[(rows,)](x, residual, weight, bias, h, y, cols, 1e-5, BLOCK=triton.next_power_of_2(cols))
    return h, y
