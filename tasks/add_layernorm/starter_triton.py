import torch
import triton
import triton.language as tl


@triton.jit
def _round_to(v, dtype: tl.constexpr):
    # float32 -> dtype, rounding to nearest even as PyTorch does. On the GPU v.to(tl.bfloat16) does
    # exactly this, but Triton's CPU interpreter truncates, and that would shift h by an ulp and y
    # (computed from h) by far more; so for bfloat16 round by hand on the bits (inputs are finite).
    if dtype == tl.bfloat16:
        bits = v.to(tl.uint32, bitcast=True)
        bits += 0x7FFF + ((bits >> 16) & 1)
        return (bits >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)
    else:
        return v.to(dtype)


@triton.jit
def add_kernel(x_ptr, res_ptr, h_ptr, n, BLOCK: tl.constexpr):
    # h = x + residual, added in float32 and rounded to h's dtype: for bfloat16 this rounding is
    # part of the task, since the LayerNorm below must see the h that is returned.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    r = tl.load(res_ptr + offs, mask=mask).to(tl.float32)
    tl.store(h_ptr + offs, _round_to(x + r, h_ptr.dtype.element_ty), mask=mask)


@triton.jit
def layernorm_kernel(h_ptr, w_ptr, b_ptr, y_ptr, cols, eps, BLOCK: tl.constexpr):
    # One program per row, walking the row in BLOCK-sized pieces three times: once for the mean,
    # once for the variance, once to write y.
    row = tl.program_id(0).to(tl.int64) * cols
    acc = tl.zeros([BLOCK], dtype=tl.float32)  # per-lane partial sums, reduced once at the end
    for start in range(0, cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        acc += tl.load(h_ptr + row + c, mask=c < cols, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / cols
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        h = tl.load(h_ptr + row + c, mask=c < cols, other=0.0).to(tl.float32)
        d = tl.where(c < cols, h - mean, 0.0)  # padding lanes must not add (0 - mean)^2
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / cols + eps)  # biased variance: divide by cols
    for start in range(0, cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        mask = c < cols
        h = tl.load(h_ptr + row + c, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + c, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + c, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row + c, ((h - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


def solution(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor):
    # Two kernels, as eager PyTorch does it: h goes to memory and the LayerNorm reads it back
    # (three times). Fusing them saves those reads; h must still be written, it is an output.
    rows, cols = x.shape
    h = torch.empty_like(x)
    y = torch.empty_like(x)
    n = rows * cols
    add_kernel[(triton.cdiv(n, 1024),)](x, residual, h, n, BLOCK=1024)
    block = min(triton.next_power_of_2(cols), 4096)
    layernorm_kernel[(rows,)](h, weight, bias, y, cols, 1e-5, BLOCK=block)
    return h, y
