import torch


def make_inputs(shape: dict, seed: int, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device=device).manual_seed(seed)
    # Mean 0.5: the sum grows like n/2, so a relative tolerance is meaningful at every n
    # (with mean 0 the sum would hover near 0 and only rounding noise would be left).
    n = shape["n"]
    x = torch.randn(n, generator=g, device=device) + 0.5
    if n >= 1000:  # 64 spikes at random places, each about 18 times what the tolerance allows of the whole sum: a
        # kernel that skips some elements and estimates them from the rest (a statistical shortcut, which mean-0.5
        # noise alone let through at rtol 1e-4) misses one with each skipped element's chance
        x[torch.randint(0, n, (64,), generator=g, device=device)] += 1e-3 * n
    return (x.to(getattr(torch, shape["dtype"])),)


def reference(x: torch.Tensor) -> torch.Tensor:
    return x.sum()


def flops(shape: dict) -> int:
    return shape["n"]


def bytes_moved(shape: dict) -> int:
    return (shape["n"] + 1) * torch.finfo(getattr(torch, shape["dtype"])).bits // 8
