import torch
import triton
import triton.language as tl


@triton.jit
def histogram_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # One global atomic add per element. Correct (atomics make concurrent increments of the same
    # counter add up), but every increment is a round trip to L2, and increments of a hot counter
    # queue behind each other. A fast kernel counts into a private histogram first.
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask, other=0)
    tl.atomic_add(out_ptr + v, tl.full([BLOCK], 1, tl.int32), mask=mask)


def solution(x: torch.Tensor, hist: torch.Tensor) -> torch.Tensor:
    out = hist.clone()  # start from the earlier counts; the kernel adds x's
    n = x.numel()
    BLOCK = 1024
    histogram_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
    return out
