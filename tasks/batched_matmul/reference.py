import torch


def make_inputs(shape: dict, seed: int, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device=device).manual_seed(seed)
    batch, m, n, k = shape["batch"], shape["m"], shape["n"], shape["k"]
    dtype = getattr(torch, shape["dtype"])
    a = torch.randn(batch, m, k, generator=g, device=device)
    b = torch.randn(batch, k, n, generator=g, device=device) / k**0.5  # keeps c near unit scale at every k
    return a.to(dtype), b.to(dtype)


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b


def flops(shape: dict) -> int:
    return 2 * shape["batch"] * shape["m"] * shape["n"] * shape["k"]


def bytes_moved(shape: dict) -> int:
    batch, m, n, k = shape["batch"], shape["m"], shape["n"], shape["k"]
    return batch * (m * k + k * n + m * n) * torch.finfo(getattr(torch, shape["dtype"])).bits // 8
