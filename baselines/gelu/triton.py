import torch
import triton
import triton.language as tl

# Memory-bound like vector add: large blocks, 16 elements (four or two 16-byte vectors) per thread.
BLOCK = 4096
NUM_WARPS = 8


@triton.jit
def _gelu(x):
    # 0.5 * (1 + tanh(u)) == sigmoid(2u), so gelu(x) = x / (1 + exp(-2u)): one exp, one divide,
    # and no 1 + tanh cancellation for negative x.
    x = x.to(tl.float32)
    u2 = 1.5957691216057308 * (x + 0.044715 * x * x * x)  # 2 * sqrt(2/pi) * (x + 0.044715 x^3)
    # Capping exp's argument at 80 keeps it finite (no inf, no overflow warnings in the interpreter);
    # there x / exp(80) is below 1e-33, i.e. the same zero the reference gives.
    return x / (1.0 + tl.exp(tl.minimum(-u2, 80.0)))


@triton.jit
def gelu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK  # int64 so n beyond 2**31 cannot wrap
    offs = start + tl.arange(0, BLOCK)
    if start + BLOCK <= n:
        # Full blocks unmasked so loads/stores stay 16-byte vectors whatever n is.
        tl.store(out_ptr + offs, _gelu(tl.load(x_ptr + offs)).to(out_ptr.dtype.element_ty))
    else:
        mask = offs < n
        y = _gelu(tl.load(x_ptr + offs, mask=mask))
        tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def solution(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    gelu_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK, num_warps=NUM_WARPS)
    return out
