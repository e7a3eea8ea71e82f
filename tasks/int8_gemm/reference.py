import torch


def make_inputs(shape: dict, seed: int, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device=device).manual_seed(seed)
    m, n, k = shape["m"], shape["n"], shape["k"]
    # W8A8 quantization: activations x ~ N(0, 1) and weights w ~ N(0, 1/k), stored as int8 codes
    # (about 1/4 of the int8 range per standard deviation) with per-row / per-column scales, so
    # the dequantized product x @ w is near unit scale at every k.
    a = (32 * torch.randn(m, k, generator=g, device=device)).round().clamp(-127, 127).to(torch.int8)
    b = (32 * torch.randn(k, n, generator=g, device=device)).round().clamp(-127, 127).to(torch.int8)
    sa = (0.5 + torch.rand(m, generator=g, device=device)) / 32
    sb = (0.5 + torch.rand(n, generator=g, device=device)) / (32 * k**0.5)
    return a, b, sa, sb


def _int_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b with exact int32 accumulation, on any device."""
    m, k = a.shape
    n = b.shape[1]
    if a.is_cuda and m > 16 and k % 8 == 0 and n % 8 == 0 and k > 0:
        # cuBLASLt's int8 GEMM (what a PyTorch user calls). Its fast kernels want b column-major,
        # so hand it a column-major copy rather than take its slow path for a row-major b.
        try:
            return torch._int_mm(a, b.t().contiguous().t())
        except RuntimeError:  # a cuBLAS without this int8 kernel: the exact float64 path below
            pass
    # Elsewhere float64: |a @ b| <= 127 * 127 * k stays far below 2**53, so every partial sum is an
    # exactly representable integer and the result is exact.
    return (a.double() @ b.double()).to(torch.int32)


def reference(a: torch.Tensor, b: torch.Tensor, sa: torch.Tensor, sb: torch.Tensor) -> torch.Tensor:
    acc = _int_matmul(a, b)
    return (acc.float() * sa[:, None] * sb[None, :]).to(torch.bfloat16)


def flops(shape: dict) -> int:
    m, n, k = shape["m"], shape["n"], shape["k"]
    return 2 * m * n * k + 2 * m * n  # int8 multiply-adds, then two scale multiplies per output


def bytes_moved(shape: dict) -> int:
    m, n, k = shape["m"], shape["n"], shape["k"]
    return m * k + k * n + 4 * (m + n) + 2 * m * n  # int8 a and b, float32 scales, bfloat16 out
