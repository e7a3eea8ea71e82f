"""Honest: the submission's own Triton kernel registered with `torch.library.triton_op` and launched through
`wrap_triton`, as PyTorch's guide to custom Triton kernels writes it; the watch runs the operator's function itself.

task: relu
language: triton
modes: cpu gpu
"""

import torch
import triton
import triton.language as tl
from torch.library import triton_op, wrap_triton


@triton.jit
def relu_kernel(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.maximum(tl.load(x + offs, mask=mask), 0.0), mask=mask)


@triton_op("kerneldojo_honest::relu", mutates_args={})
def relu(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    wrap_triton(relu_kernel)[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    return out


def solution(x):
    return relu(x)
