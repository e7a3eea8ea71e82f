"""Honest: a persistent kernel (a grid of one program per SM looping over all row tiles).

The grid is capped at the number of SMs (4 programs in CPU mode) and each program walks the rows
`pid, pid + grid, ...` with `tl.range`, the shape persistent GEMMs and reductions use. Fewer, longer
programs; the same work. Must not trip `decoy_kernel`, `below_floor` or a stream check.

task: softmax
language: triton
modes: cpu gpu
"""

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_persistent(x, out, rows, cols, BLOCK: tl.constexpr):
    for row in tl.range(tl.program_id(0), rows, tl.num_programs(0)):
        base = row * cols  # under 2**31 at every shape of this task
        m = tl.full((), float("-inf"), tl.float32)
        s = tl.zeros((), tl.float32)
        for start in range(0, cols, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            v = tl.load(x + base + offs, mask=offs < cols, other=float("-inf")).to(tl.float32)
            new_m = tl.maximum(m, tl.max(v, axis=0))
            s = s * tl.exp(m - new_m) + tl.sum(tl.exp(v - new_m), axis=0)
            m = new_m
        for start in range(0, cols, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            v = tl.load(x + base + offs, mask=offs < cols, other=float("-inf")).to(tl.float32)
            tl.store(out + base + offs, (tl.exp(v - m) / s).to(out.dtype.element_ty), mask=offs < cols)


def solution(x):
    rows, cols = x.shape
    out = torch.empty_like(x)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 4
    block = min(triton.next_power_of_2(max(cols, 1)), 4096)
    softmax_persistent[(max(min(rows, sms), 1),)](x, out, rows, cols, BLOCK=block)
    return out
