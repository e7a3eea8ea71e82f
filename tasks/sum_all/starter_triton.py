import torch
import triton
import triton.language as tl


@triton.jit
def sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # Each program sums one block of BLOCK elements (tl.sum adds the lanes as a tree) and adds
    # its partial sum to the single output with an atomic: simple, but n / BLOCK atomics all hit
    # one address, and their order (so the last bits of the result) varies from run to run.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.atomic_add(out_ptr, tl.sum(x, axis=0))


def solution(x: torch.Tensor) -> torch.Tensor:
    n = x.numel()
    out = torch.zeros((), device=x.device, dtype=torch.float32)  # atomics need a zeroed start
    BLOCK = 1024
    sum_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
    return out
