"""Honest: libdevice's functions called through the module (`libdevice.tanh`, as Triton's extern-functions tutorial
does), and its `erf` on a term that is exactly zero (standing in for an exact-erf GELU or a Gaussian CDF).

CPU mode runs libdevice as numpy: a call through the module ran the stub's empty body (`runtime_error`), and `erf`
went through torch, which the operator watch charged to the submission (`flagged`): red team round 64.

task: gelu
language: triton
modes: cpu gpu
"""

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def gelu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    y = 0.5 * x * (1.0 + libdevice.tanh(inner)) + libdevice.erf(x * 0.0)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def solution(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    gelu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    return out
