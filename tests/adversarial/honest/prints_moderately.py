"""Honest: a solution that prints a lot (moderately: a few hundred lines per call).

Debug output is not a fault: well under the worker's output cap it must change nothing.

task: vector_add
language: triton
modes: cpu gpu
"""

import torch
import triton
import triton.language as tl


@triton.jit
def add(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)


def solution(x, y):
    n = x.numel()
    for i in range(300):
        print(f"debug {i:3d}: n={n} grid={triton.cdiv(n, 1024)} block=1024 dtype={x.dtype} device={x.device}")
    out = torch.empty_like(x)
    add[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    print("launched", flush=True)
    return out
