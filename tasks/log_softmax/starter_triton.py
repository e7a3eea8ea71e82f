import torch
import triton
import triton.language as tl


@triton.jit
def log_softmax_kernel(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    # One program per row, three passes over it in BLOCK-sized chunks: the max, the sum of
    # exp(x - max), then the output. Correct for any row length, but the row is read from memory
    # three times; a fast kernel reads it once.
    row_start = tl.program_id(0).to(tl.int64) * cols
    offs = tl.arange(0, BLOCK)

    # Pass 1: the row maximum. Padding lanes read -inf, which never wins.
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    for start in range(0, cols, BLOCK):
        x = tl.load(x_ptr + row_start + start + offs, mask=start + offs < cols, other=-float("inf"))
        m = tl.maximum(m, x.to(tl.float32))
    row_max = tl.max(m, axis=0)

    # Pass 2: the sum of exp(x - max); padding adds exp(-inf) = 0.
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        x = tl.load(x_ptr + row_start + start + offs, mask=start + offs < cols, other=-float("inf"))
        s += tl.exp(x.to(tl.float32) - row_max)
    log_sum = tl.log(tl.sum(s, axis=0))

    # Pass 3: out = x - max - log(sum), in the shifted form that never takes log(0).
    for start in range(0, cols, BLOCK):
        mask = start + offs < cols
        x = tl.load(x_ptr + row_start + start + offs, mask=mask, other=0.0).to(tl.float32)
        y = x - row_max - log_sum
        tl.store(out_ptr + row_start + start + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def solution(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape
    out = torch.empty_like(x)
    log_softmax_kernel[(rows,)](x, out, cols, BLOCK=1024)
    return out
