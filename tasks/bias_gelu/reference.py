import math

import torch


def make_inputs(shape: dict, seed: int, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device=device).manual_seed(seed)
    dtype = getattr(torch, shape["dtype"])
    x = 3 * torch.randn(shape["rows"], shape["cols"], generator=g, device=device)  # e.g. a linear layer's output
    bias = 0.5 * torch.randn(shape["cols"], generator=g, device=device)
    return x.to(dtype), bias.to(dtype)


def reference(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    # Deliberately unfused: every operator below is a separate kernel in eager PyTorch.
    h = x.float() + bias.float()
    inner = math.sqrt(2 / math.pi) * (h + 0.044715 * h * h * h)
    return (0.5 * h * (1 + torch.tanh(inner))).to(x.dtype)


def flops(shape: dict) -> int:
    return 11 * shape["rows"] * shape["cols"]  # the bias add, then the GELU's ten


def bytes_moved(shape: dict) -> int:
    size = torch.finfo(getattr(torch, shape["dtype"])).bits // 8
    return (2 * shape["rows"] * shape["cols"] + shape["cols"]) * size  # read x and bias, write out
