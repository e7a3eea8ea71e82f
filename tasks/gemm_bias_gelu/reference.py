import torch
import torch.nn.functional as F


def make_inputs(shape: dict, seed: int, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device=device).manual_seed(seed)
    m, n, k = shape["m"], shape["n"], shape["k"]
    a = torch.randn(m, k, generator=g, device=device)
    w = torch.randn(k, n, generator=g, device=device) / k**0.5  # keeps a @ w near unit scale at every k
    bias = 0.5 * torch.randn(n, generator=g, device=device)
    return a.bfloat16(), w.bfloat16(), bias.bfloat16()


def reference(a: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    # Eager: a GEMM that writes a @ w to memory, an add kernel, then a GELU kernel.
    return F.gelu(a @ w + bias, approximate="tanh")


def flops(shape: dict) -> int:
    m, n, k = shape["m"], shape["n"], shape["k"]
    return 2 * m * n * k + 10 * m * n  # the GEMM, then bias and tanh-GELU per output


def bytes_moved(shape: dict) -> int:
    m, n, k = shape["m"], shape["n"], shape["k"]
    return (m * k + k * n + n + m * n) * 2
