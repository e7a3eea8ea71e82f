import torch


def make_inputs(shape: dict, seed: int, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device=device).manual_seed(seed)
    # Mean 0.5: the sum grows like n/2, so a relative tolerance is meaningful at every n
    # (with mean 0 the sum would hover near 0 and only rounding noise would be left).
    x = torch.randn(shape["n"], generator=g, device=device) + 0.5
    return (x.to(getattr(torch, shape["dtype"])),)


def reference(x: torch.Tensor) -> torch.Tensor:
    return x.sum()


def flops(shape: dict) -> int:
    return shape["n"]


def bytes_moved(shape: dict) -> int:
    return (shape["n"] + 1) * torch.finfo(getattr(torch, shape["dtype"])).bits // 8
