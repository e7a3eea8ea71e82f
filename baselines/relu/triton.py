import torch
import triton
import triton.language as tl

# Pure data movement, like vector add: 4096 elements over 8 warps is 16 per thread, i.e. four
# (float32) or two (bfloat16) 16-byte loads in flight per thread.
BLOCK = 4096
NUM_WARPS = 8


@triton.jit
def _relu(x):
    # Widened to float32 (exact both ways for bfloat16): Triton's CPU interpreter compares raw
    # bfloat16 bit patterns, and on the GPU the conversion is free next to the memory traffic.
    x = x.to(tl.float32)
    return tl.where(x > 0.0, x, 0.0)


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK  # int64 so n beyond 2**31 cannot wrap
    offs = start + tl.arange(0, BLOCK)
    if start + BLOCK <= n:
        # Full blocks go unmasked: a mask against an n the compiler cannot prove is a multiple of 16
        # would make every block fall back to scalar accesses, not just the last.
        tl.store(out_ptr + offs, _relu(tl.load(x_ptr + offs)).to(out_ptr.dtype.element_ty))
    else:
        mask = offs < n
        y = _relu(tl.load(x_ptr + offs, mask=mask))
        tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def solution(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    relu_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK, num_warps=NUM_WARPS)
    return out
