import torch


def make_inputs(shape: dict, seed: int, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device=device).manual_seed(seed)
    n, dtype = shape["n"], getattr(torch, shape["dtype"])
    return tuple(torch.randn(n, generator=g, device=device, dtype=dtype) for _ in range(2))


def reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y


def flops(shape: dict) -> int:
    return shape["n"]


def bytes_moved(shape: dict) -> int:
    return 3 * shape["n"] * torch.finfo(getattr(torch, shape["dtype"])).bits // 8
