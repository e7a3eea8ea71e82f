import torch
import triton
import triton.language as tl


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, cols, eps, BLOCK: tl.constexpr):
    # One program per row, walking the row in BLOCK-sized pieces three times: once for the mean,
    # once for the variance, once to write y. Correct at any length, but x is read from memory
    # three times; a fast kernel keeps the row in registers and reads it once.
    row = tl.program_id(0).to(tl.int64) * cols
    acc = tl.zeros([BLOCK], dtype=tl.float32)  # per-lane partial sums, reduced once at the end
    for start in range(0, cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row + c, mask=c < cols, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / cols
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row + c, mask=c < cols, other=0.0).to(tl.float32)
        d = tl.where(c < cols, x - mean, 0.0)  # padding lanes must not add (0 - mean)^2
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / cols + eps)  # biased variance: divide by cols
    for start in range(0, cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        mask = c < cols
        x = tl.load(x_ptr + row + c, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + c, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + c, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_ptr + row + c, y.to(y_ptr.dtype.element_ty), mask=mask)


def solution(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape
    y = torch.empty_like(x)
    block = min(triton.next_power_of_2(cols), 4096)
    layernorm_kernel[(rows,)](x, weight, bias, y, cols, 1e-5, BLOCK=block)
    return y
