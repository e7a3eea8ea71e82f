import torch


def make_inputs(shape: dict, seed: int, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device=device).manual_seed(seed)
    m, n, k = shape["m"], shape["n"], shape["k"]
    # Per-tensor-scaled fp8 (e4m3): activations quantized with a spread of a few units (e4m3 has
    # 3 mantissa bits and a range of +-448), weights likewise, and one float32 scale each that
    # brings a @ b^T back to about unit size at every k.
    a = (2 * torch.randn(m, k, generator=g, device=device)).to(torch.float8_e4m3fn)
    b = (2 * torch.randn(n, k, generator=g, device=device)).to(torch.float8_e4m3fn)
    scale_a = (0.5 + torch.rand(1, generator=g, device=device)) / 2
    scale_b = (0.5 + torch.rand(1, generator=g, device=device)) / (2 * k**0.5)
    return a, b, scale_a, scale_b


def reference(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor) -> torch.Tensor:
    k, n = a.shape[1], b.shape[0]
    if a.is_cuda and k % 16 == 0 and n % 16 == 0:
        # cuBLASLt's fp8 GEMM, as a PyTorch user calls it: b^T is the column-major (k, n) operand.
        try:
            return torch._scaled_mm(a, b.t(), scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16)
        except RuntimeError:  # a GPU or cuBLAS without fp8 GEMMs: the exact float32 path below
            pass
    # Products of two e4m3 values have at most 8 significant bits, so float32 (or TF32) forms them
    # exactly; the sums round like the tensor cores' float32 accumulation does.
    return ((a.float() @ b.float().T) * (scale_a * scale_b)).to(torch.bfloat16)


def flops(shape: dict) -> int:
    m, n, k = shape["m"], shape["n"], shape["k"]
    return 2 * m * n * k + m * n  # fp8 multiply-adds, then one scale per output


def bytes_moved(shape: dict) -> int:
    m, n, k = shape["m"], shape["n"], shape["k"]
    return m * k + n * k + 8 + 2 * m * n  # fp8 a and b, two float32 scales, bf16 c
