import torch
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n  # the last block may run past the end
    # Compare in float32: exact for bfloat16 too (widening and narrowing back lose nothing), and
    # Triton's CPU interpreter compares bfloat16 values wrongly, so this keeps CPU mode honest.
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = tl.where(x > 0.0, x, 0.0)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def solution(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 1024
    relu_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
    return out
