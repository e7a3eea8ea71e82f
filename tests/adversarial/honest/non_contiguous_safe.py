"""Honest: non-contiguous inputs handled through their strides.

matrix_add passes x as a column slice of a wider buffer (row stride cols + 3, offset 1) and y as
a transposed, column-major tensor. The kernel indexes both through their strides and writes a
contiguous output; no copy to contiguous first.

task: matrix_add
language: triton
modes: cpu gpu
"""

import torch
import triton
import triton.language as tl


@triton.jit
def add2d(x, y, out, rows, cols, sxr, sxc, syr, syc, BR: tl.constexpr, BC: tl.constexpr):
    r = tl.program_id(0) * BR + tl.arange(0, BR)[:, None]
    c = tl.program_id(1) * BC + tl.arange(0, BC)[None, :]
    mask = (r < rows) & (c < cols)
    v = tl.load(x + r * sxr + c * sxc, mask=mask) + tl.load(y + r * syr + c * syc, mask=mask)
    tl.store(out + r * cols + c, v, mask=mask)


def solution(x, y):
    rows, cols = x.shape
    out = torch.empty((rows, cols), device=x.device, dtype=x.dtype)
    grid = (triton.cdiv(rows, 32), triton.cdiv(cols, 32))
    add2d[grid](x, y, out, rows, cols, x.stride(0), x.stride(1), y.stride(0), y.stride(1), BR=32, BC=32)
    return out
