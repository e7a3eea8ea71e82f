import torch


def make_inputs(shape: dict, seed: int, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(shape["n"], generator=g, device=device)  # half negative, half positive
    return (x.to(getattr(torch, shape["dtype"])),)


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x)


def flops(shape: dict) -> int:
    return shape["n"]


def bytes_moved(shape: dict) -> int:
    return 2 * shape["n"] * torch.finfo(getattr(torch, shape["dtype"])).bits // 8
