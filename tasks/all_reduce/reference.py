import torch


def make_inputs(shape: dict, seed: int, device) -> tuple[torch.Tensor, ...]:
    """Every rank's x, stacked: row r is rank r's input. Each rank draws its own scale and offset, so
    a sum that drops or doubles a rank is wrong everywhere, not just in the last bits."""
    g = torch.Generator(device=device).manual_seed(seed)
    ranks, n = shape["ranks"], shape["n"]
    scale = 0.5 + torch.rand(ranks, 1, generator=g, device=device)
    offset = torch.randn(ranks, 1, generator=g, device=device)
    x = torch.randn(ranks, n, generator=g, device=device) * scale + offset
    return (x.to(getattr(torch, shape["dtype"])),)


def reference(x: torch.Tensor) -> torch.Tensor:
    """Every rank's output, stacked like the inputs: the float32 sum over ranks, rounded once."""
    total = x.float().sum(0, keepdim=True).to(x.dtype)
    return total.expand_as(x).contiguous()


def flops(shape: dict) -> int:
    return (shape["ranks"] - 1) * shape["n"]  # additions per rank


def bytes_moved(shape: dict) -> int:
    """Per rank, through its own HBM: x read once, out written once. The link traffic, (ranks - 1) / ranks
    of x in and out per rank or more, is reported as bus bandwidth instead (docs/results.md)."""
    return 2 * shape["n"] * torch.finfo(getattr(torch, shape["dtype"])).bits // 8


def peer_buffer_bytes(shape: dict) -> int:
    """Scratch per rank that the judge maps into every rank: room for two copies of x (double buffering)."""
    return 2 * shape["n"] * torch.finfo(getattr(torch, shape["dtype"])).bits // 8
