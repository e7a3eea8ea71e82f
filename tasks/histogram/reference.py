import torch


def make_inputs(shape: dict, seed: int, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device=device).manual_seed(seed)
    n, bins = shape["n"], shape["bins"]
    # Skewed, as real data is: with u uniform in [0, 1), bin floor(u^2 * bins) makes the low bins
    # hot (bin 0 gets 1/sqrt(bins) of all values), which is what makes naive atomics contend.
    u = torch.rand(n, generator=g, device=device)
    x = (u * u * bins).to(torch.int32).clamp_(max=bins - 1)
    hist = torch.randint(0, 1 << 20, (bins,), generator=g, device=device, dtype=torch.int32)
    return x, hist


def reference(x: torch.Tensor, hist: torch.Tensor) -> torch.Tensor:
    return hist + torch.bincount(x, minlength=hist.numel()).to(torch.int32)


def flops(shape: dict) -> int:
    return shape["n"]  # one increment per value


def bytes_moved(shape: dict) -> int:
    return 4 * shape["n"] + 2 * 4 * shape["bins"]
