import torch
import triton
import triton.language as tl


@triton.jit
def rope_kernel(x_ptr, cos_ptr, sin_ptr, out_ptr, heads, half, BLOCK: tl.constexpr):
    # One program per (token, head) row of head_dim elements: BLOCK pairs (element i of the first
    # half with element i of the second), BLOCK = half rounded up to a power of two. Correct for any
    # even head_dim, but each program moves only a few hundred bytes, which is too little work to
    # keep the GPU's memory system busy; a fast version gives each program many rows.
    row = tl.program_id(0)  # = token * heads + head
    token = row // heads
    i = tl.arange(0, BLOCK)
    mask = i < half
    x_row = x_ptr + row.to(tl.int64) * (2 * half)
    x1 = tl.load(x_row + i, mask=mask).to(tl.float32)
    x2 = tl.load(x_row + half + i, mask=mask).to(tl.float32)
    c = tl.load(cos_ptr + token.to(tl.int64) * half + i, mask=mask)
    s = tl.load(sin_ptr + token.to(tl.int64) * half + i, mask=mask)
    out_row = out_ptr + row.to(tl.int64) * (2 * half)
    tl.store(out_row + i, (x1 * c - x2 * s).to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(out_row + half + i, (x2 * c + x1 * s).to(out_ptr.dtype.element_ty), mask=mask)


def solution(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    tokens, heads, head_dim = x.shape
    out = torch.empty_like(x)
    half = head_dim // 2
    rope_kernel[(tokens * heads,)](x, cos, sin, out, heads, half, BLOCK=triton.next_power_of_2(half))
    return out
