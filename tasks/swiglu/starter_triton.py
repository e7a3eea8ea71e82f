import torch
import triton
import triton.language as tl


@triton.jit
def swiglu_kernel(x_ptr, out_ptr, n, hidden, BLOCK: tl.constexpr):
    # One lane per output element, numbered flat over (rows, hidden). Row r of x holds
    # [gate | up]: 2*hidden elements, gate first. The divide and modulo per element are simple
    # but cost instructions, and keep the compiler from proving the loads contiguous.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    r = offs // hidden
    c = offs % hidden
    gate = tl.load(x_ptr + r * 2 * hidden + c, mask=mask).to(tl.float32)
    up = tl.load(x_ptr + r * 2 * hidden + hidden + c, mask=mask).to(tl.float32)
    silu = gate / (1.0 + tl.exp(-gate))  # silu(g) = g * sigmoid(g)
    tl.store(out_ptr + offs, (silu * up).to(out_ptr.dtype.element_ty), mask=mask)


def solution(x: torch.Tensor) -> torch.Tensor:
    rows, hidden = x.shape[0], x.shape[1] // 2
    out = torch.empty((rows, hidden), device=x.device, dtype=x.dtype)
    n = rows * hidden
    BLOCK = 1024
    swiglu_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, hidden, BLOCK=BLOCK)
    return out
