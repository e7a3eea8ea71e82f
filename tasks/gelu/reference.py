import math

import torch


def make_inputs(shape: dict, seed: int, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device=device).manual_seed(seed)
    x = 3 * torch.randn(shape["n"], generator=g, device=device)
    return (x.to(getattr(torch, shape["dtype"])),)


def reference(x: torch.Tensor) -> torch.Tensor:
    # Deliberately unfused: every operator below is a separate kernel in eager PyTorch.
    x32 = x.float()
    inner = math.sqrt(2 / math.pi) * (x32 + 0.044715 * x32 * x32 * x32)
    return (0.5 * x32 * (1 + torch.tanh(inner))).to(x.dtype)


def flops(shape: dict) -> int:
    return 10 * shape["n"]


def bytes_moved(shape: dict) -> int:
    return 2 * shape["n"] * torch.finfo(getattr(torch, shape["dtype"])).bits // 8
