"""Honest: reshapes and a `.contiguous()` of the submission's own output (Python-side, no arithmetic).

The kernel writes softmax column-major (program r stores row r into `out_t[:, r]` of a (cols, rows)
buffer, the layout a kernel fused with a transposed consumer would want), and the host returns
`out_t.t().contiguous()`, the task's row-major layout; a flat view in between. The copy costs a
pass over the output and computes nothing; `contiguous`, `t` and `view` are on the default
allowlist. Must not trip the allowlist, the aliasing or the layout check.

task: softmax
language: triton
modes: cpu gpu
"""

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_to_columns(x, out_t, rows, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = tl.full((), float("-inf"), tl.float32)
    s = tl.zeros((), tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(x + row * cols + offs, mask=offs < cols, other=float("-inf")).to(tl.float32)
        new_m = tl.maximum(m, tl.max(v, axis=0))
        s = s * tl.exp(m - new_m) + tl.sum(tl.exp(v - new_m), axis=0)
        m = new_m
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(x + row * cols + offs, mask=offs < cols, other=float("-inf")).to(tl.float32)
        tl.store(out_t + offs * rows + row, (tl.exp(v - m) / s).to(out_t.dtype.element_ty), mask=offs < cols)


def solution(x):
    rows, cols = x.shape
    flat = torch.empty(rows * cols, device=x.device, dtype=x.dtype)
    out_t = flat.view(cols, rows)
    softmax_to_columns[(rows,)](x, out_t, rows, cols, BLOCK=1024)
    return out_t.t().contiguous()
