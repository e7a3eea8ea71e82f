"""Honest: torch operators that the task allows, around the submission's own kernel.

Converts x to float32 with `.float()` (aten._to_copy), runs its own Triton softmax on the
contiguous float32 rows, and casts back with `.to(x.dtype)`. Allocation, views, dtype casts and
copies are not the work the task asks for; only the operators on the forbidden list flag.

task: softmax
language: triton
modes: cpu gpu
"""

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_rows(x, out, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + row * cols + offs, mask=offs < cols, other=float("-inf"))
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(out + row * cols + offs, e / tl.sum(e, axis=0), mask=offs < cols)


def solution(x):
    rows, cols = x.shape
    x32 = x.float().contiguous().view(rows, cols)
    out32 = torch.zeros((rows, cols), device=x.device, dtype=torch.float32)
    softmax_rows[(rows,)](x32, out32, cols, BLOCK=triton.next_power_of_2(cols))
    return out32.to(x.dtype).reshape(x.shape)
