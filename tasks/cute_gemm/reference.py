import torch


def make_inputs(shape: dict, seed: int, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device=device).manual_seed(seed)
    m, n, k = shape["m"], shape["n"], shape["k"]
    # Both operands K-major ("TN"): a is (m, k) and b is (n, k), each row-major. A random offset
    # and scale per call keeps the products away from a single fixed distribution.
    scale = 0.5 + torch.rand((), generator=g, device=device)
    a = scale * torch.randn(m, k, generator=g, device=device) + 0.1 * torch.randn((), generator=g, device=device)
    b = torch.randn(n, k, generator=g, device=device) / k**0.5  # keeps c near unit scale at every k
    return a.bfloat16(), b.bfloat16()


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b.T


def flops(shape: dict) -> int:
    return 2 * shape["m"] * shape["n"] * shape["k"]


def bytes_moved(shape: dict) -> int:
    m, n, k = shape["m"], shape["n"], shape["k"]
    return (m * k + n * k + m * n) * 2  # read a and b once, write c once, all bf16
