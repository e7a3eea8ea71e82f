import torch


def make_inputs(shape: dict, seed: int, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device=device).manual_seed(seed)
    x = 4 * torch.randn(shape["rows"], shape["cols"], generator=g, device=device)
    # Each row shifted by up to 150 either way (softmax does not change): exp(x) without the row max subtracted
    # overflows to inf, or every term underflows to 0, on most rows (red team round 119 passed such a kernel)
    x += 300 * torch.rand(shape["rows"], 1, generator=g, device=device) - 150
    return (x.to(getattr(torch, shape["dtype"])),)


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def flops(shape: dict) -> int:
    return 5 * shape["rows"] * shape["cols"]  # max, subtract, exp, sum, divide


def bytes_moved(shape: dict) -> int:
    return 2 * shape["rows"] * shape["cols"] * torch.finfo(getattr(torch, shape["dtype"])).bits // 8
