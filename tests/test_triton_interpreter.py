"""Our fixes to Triton's CPU interpreter: bf16 dot products and float32 -> bf16 rounding."""

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
