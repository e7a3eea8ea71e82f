import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, cols, eps, BLOCK: tl.constexpr):
    # One program per row, walking the row in BLOCK-sized pieces twice: once for the mean square,
    # once to write y. Correct at any length, but x is read from memory twice; a fast kernel keeps
    # the row in registers and reads it once.
    row = tl.program_id(0).to(tl.int64) * cols
    acc = tl.zeros([BLOCK], dtype=tl.float32)  # per-lane partial sums, reduced once at the end
    for start in range(0, cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row + c, mask=c < cols, other=0.0).to(tl.float32)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / cols + eps)
    for start in range(0, cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        mask = c < cols
        x = tl.load(x_ptr + row + c, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + c, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row + c, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def solution(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape
    y = torch.empty_like(x)
    block = min(triton.next_power_of_2(cols), 4096)
    rmsnorm_kernel[(rows,)](x, weight, y, cols, 1e-6, BLOCK=block)
    return y
