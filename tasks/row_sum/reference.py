import torch


def make_inputs(shape: dict, seed: int, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device=device).manual_seed(seed)
    # Mean 0.5: row sums grow with cols, so the relative tolerance means something even for
    # rows of a million elements (with zero mean, sums would hover near 0).
    rows, cols = shape["rows"], shape["cols"]
    x = torch.randn(rows, cols, generator=g, device=device) + 0.5
    if cols >= 1000:  # each row its own mean and 8 spikes at random places, each about 6 times what the bfloat16
        # tolerance allows of the row's sum: a kernel that sums part of a row and estimates the rest (from a known
        # mean, or from the part it read) misses them (red team round 61; `sum_all` has had spikes since round 43)
        x += torch.rand(rows, 1, generator=g, device=device) - 0.5
        spiked = torch.randint(0, cols, (rows, 8), generator=g, device=device)
        x.scatter_add_(1, spiked, torch.full((rows, 8), 0.05 * cols, device=device))
    return (x.to(getattr(torch, shape["dtype"])),)


def reference(x: torch.Tensor) -> torch.Tensor:
    return x.sum(dim=-1)  # float32 accumulation for bfloat16 too, rounded to x's dtype


def flops(shape: dict) -> int:
    return shape["rows"] * shape["cols"]


def bytes_moved(shape: dict) -> int:
    rows, cols = shape["rows"], shape["cols"]
    return (rows * cols + rows) * torch.finfo(getattr(torch, shape["dtype"])).bits // 8
