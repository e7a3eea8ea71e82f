"""Our fixes to Triton's CPU interpreter: bf16 dot products, arithmetic, comparisons and reductions, float32 ->
bf16 rounding (tests/test_third_party_kernels.py runs real kernels that need the rest)."""

import torch
import triton
import triton.language as tl

from kerneldojo.sandbox.worker.triton_interpreter import interpreter


def _kernels():
    @triton.jit
    def cast(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask).to(tl.bfloat16), mask=mask)

    @triton.jit
    def dot(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
        r = tl.arange(0, N)
        a = tl.load(a_ptr + r[:, None] * N + r[None, :])
        b = tl.load(b_ptr + r[:, None] * N + r[None, :])
        tl.store(c_ptr + r[:, None] * N + r[None, :], tl.dot(a, b))

    return cast, dot


def test_float32_to_bf16_rounds_to_nearest_even_like_torch():
    with interpreter(True):
        cast, _ = _kernels()
        x = torch.cat([torch.randn(4000) * 100, torch.tensor([1.0048828125, -1.0048828125, float("nan"), 3e38])])
        out = torch.empty(x.numel(), dtype=torch.bfloat16)
        cast[(1,)](x, out, x.numel(), BLOCK=4096)
    expected = x.to(torch.bfloat16)
    assert torch.equal(out.isnan(), expected.isnan())
    assert torch.equal(out[~out.isnan()], expected[~expected.isnan()])


def test_bf16_dot_multiplies_values_not_bit_patterns():
    with interpreter(True):
        _, dot = _kernels()
        a, b = torch.randn(16, 16).bfloat16(), torch.randn(16, 16).bfloat16()
        c = torch.empty(16, 16)
        dot[(1,)](a, b, c, N=16)
    torch.testing.assert_close(c, a.float() @ b.float(), atol=1e-4, rtol=1e-4)


@triton.jit
def _larger(a, b):
    return tl.where(a > b, a, b)


def test_bf16_and_fp16_arithmetic_comparisons_and_reductions_work_on_values():
    @triton.jit
    def ops(x_ptr, y_ptr, out_ptr, red_ptr, scale, N: tl.constexpr):
        r = tl.arange(0, N)
        x, y = tl.load(x_ptr + r), tl.load(y_ptr + r)
        tl.store(out_ptr + r, tl.where(x < y, x * y + y, tl.maximum(x, y) / scale.to(x.dtype)))
        tl.store(red_ptr, tl.sum(x, 0).to(tl.float32))  # tl.max and tl.min widen to fp32 themselves, as on the GPU
        tl.store(red_ptr + 1, tl.max(x, 0).to(tl.float32))
        tl.store(red_ptr + 2, tl.min(x, 0).to(tl.float32))
        tl.store(red_ptr + 3, tl.reduce(y, 0, _larger).to(tl.float32))  # a combine function of bf16 compares

    for dtype in (torch.bfloat16, torch.float16):
        x, y = torch.randn(64).to(dtype) * 3, -torch.rand(64).to(dtype)  # negative values: raw bits order wrongly
        out, red = torch.empty_like(x), torch.empty(4)
        with interpreter(True):
            kernel = triton.jit(ops.fn)
            kernel[(1,)](x, y, out, red, 2.5, N=64)
        xf, yf = x.float(), y.float()
        expected = torch.where(xf < yf, (xf * yf).to(dtype).float() + yf, torch.maximum(xf, yf) / 2.5).to(dtype)
        torch.testing.assert_close(out, expected, rtol=1e-2, atol=1e-2)
        torch.testing.assert_close(red, torch.stack([xf.sum(), xf.max(), xf.min(), yf.max()]), rtol=1e-2, atol=5e-2)
