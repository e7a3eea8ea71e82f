import torch
import triton
import triton.language as tl


@triton.jit
def transpose_kernel(x_ptr, out_ptr, rows, cols, BLOCK: tl.constexpr):
    # Each program writes BLOCK consecutive elements of the (cols, rows) output. Writes are
    # coalesced; the matching reads of x jump by a whole row (cols elements) from lane to lane.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < rows * cols
    j = offs // rows  # out[j, i] = x[i, j]
    i = offs % rows
    tl.store(out_ptr + offs, tl.load(x_ptr + i * cols + j, mask=mask), mask=mask)


def solution(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape
    out = torch.empty((cols, rows), device=x.device, dtype=x.dtype)
    BLOCK = 1024
    transpose_kernel[(triton.cdiv(rows * cols, BLOCK),)](x, out, rows, cols, BLOCK=BLOCK)
    return out
