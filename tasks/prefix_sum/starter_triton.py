import torch
import triton
import triton.language as tl


@triton.jit
def prefix_sum_kernel(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    # One program per row. The row is scanned BLOCK elements at a time: tl.cumsum scans the chunk
    # in parallel, and `carry` (the sum of every earlier chunk) shifts it into place.
    # Simple and correct; slow when there are few rows (one program per row cannot fill the GPU)
    # or short rows (a program then moves very few bytes).
    row_start = tl.program_id(0).to(tl.int64) * cols
    offs = tl.arange(0, BLOCK)
    carry = 0.0
    for start in range(0, cols, BLOCK):
        mask = start + offs < cols
        x = tl.load(x_ptr + row_start + start + offs, mask=mask, other=0.0)  # padding adds 0
        scan = tl.cumsum(x, axis=0) + carry
        tl.store(out_ptr + row_start + start + offs, scan, mask=mask)
        carry += tl.sum(x, axis=0)


def solution(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape
    out = torch.empty_like(x)
    prefix_sum_kernel[(rows,)](x, out, cols, BLOCK=1024)
    return out
