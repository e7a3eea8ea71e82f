import torch


def make_inputs(shape: dict, seed: int, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(shape["rows"], shape["cols"], generator=g, device=device)
    return (x.to(getattr(torch, shape["dtype"])),)


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.cumsum(x, dim=-1)


def flops(shape: dict) -> int:
    return shape["rows"] * shape["cols"]  # one addition per element


def bytes_moved(shape: dict) -> int:
    return 2 * shape["rows"] * shape["cols"] * torch.finfo(getattr(torch, shape["dtype"])).bits // 8
