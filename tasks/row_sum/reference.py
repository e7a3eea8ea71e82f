import torch


def make_inputs(shape: dict, seed: int, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device=device).manual_seed(seed)
    # Mean 0.5: row sums grow with cols, so the relative tolerance means something even for
    # rows of a million elements (with zero mean, sums would hover near 0).
    x = torch.randn(shape["rows"], shape["cols"], generator=g, device=device) + 0.5
    return (x.to(getattr(torch, shape["dtype"])),)


def reference(x: torch.Tensor) -> torch.Tensor:
    return x.sum(dim=-1)  # float32 accumulation for bfloat16 too, rounded to x's dtype


def flops(shape: dict) -> int:
    return shape["rows"] * shape["cols"]


def bytes_moved(shape: dict) -> int:
    rows, cols = shape["rows"], shape["cols"]
    return (rows * cols + rows) * torch.finfo(getattr(torch, shape["dtype"])).bits // 8
