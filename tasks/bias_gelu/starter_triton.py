import torch
import triton
import triton.language as tl


@triton.jit
def bias_gelu_kernel(x_ptr, bias_ptr, out_ptr, n, cols, BLOCK: tl.constexpr):
    # x is treated as one flat array of n = rows*cols elements; element i is in column i % cols.
    # Simple, but the modulo makes every bias access a separate gather.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)  # compute in float32 even for bfloat16 input
    b = tl.load(bias_ptr + offs % cols, mask=mask).to(tl.float32)
    h = x + b
    inner = 0.7978845608028654 * (h + 0.044715 * h * h * h)  # sqrt(2/pi) * (h + 0.044715 h^3)
    # tl has no tanh, so use tanh(u) = 1 - 2/(1 + exp(2u)). tanh(+-10) is +-1 in float32, so clamping
    # u there changes nothing but keeps exp from overflowing to inf.
    inner = tl.minimum(tl.maximum(inner, -10.0), 10.0)
    tanh = 1.0 - 2.0 / (1.0 + tl.exp(2.0 * inner))
    y = 0.5 * h * (1.0 + tanh)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def solution(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape
    out = torch.empty_like(x)
    n = rows * cols
    BLOCK = 1024
    bias_gelu_kernel[(triton.cdiv(n, BLOCK),)](x, bias, out, n, cols, BLOCK=BLOCK)
    return out
