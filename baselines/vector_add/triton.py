import torch
import triton
import triton.language as tl

# 4096 floats over 8 warps is 16 per thread: four 16-byte loads per input in flight per thread,
# enough memory-level parallelism to approach DRAM bandwidth without a persistent loop.
BLOCK = 4096
NUM_WARPS = 8


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK  # int64 so n beyond 2**31 cannot wrap
    offs = start + tl.arange(0, BLOCK)
    if start + BLOCK <= n:
        # Full blocks go unmasked: a mask against an n the compiler cannot prove is a multiple of 16
        # would make it fall back to scalar 4-byte accesses in every block, not just the last.
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))
    else:
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x + y, mask=mask)


def solution(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK, num_warps=NUM_WARPS)
    return out
