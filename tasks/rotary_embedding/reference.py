import torch


def make_inputs(shape: dict, seed: int, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device=device).manual_seed(seed)
    tokens, heads, head_dim = shape["tokens"], shape["heads"], shape["head_dim"]
    x = torch.randn(tokens, heads, head_dim, generator=g, device=device)
    # Real RoPE tables: token t at position p_t rotates pair i by the angle p_t * 10000^(-2i/head_dim).
    # Positions are random (a batch of packed sequences), so the tables change with the seed.
    positions = torch.randint(0, 32768, (tokens,), generator=g, device=device).double()
    inv_freq = 10000.0 ** (-torch.arange(0, head_dim // 2, device=device, dtype=torch.float64) * 2 / head_dim)
    angles = positions[:, None] * inv_freq[None, :]
    return x.to(getattr(torch, shape["dtype"])), angles.cos().float(), angles.sin().float()


def reference(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # Rotate-half (GPT-NeoX) RoPE as it is usually typed: each operator below is its own kernel,
    # and each writes a full-size intermediate to memory.
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    c, s = cos[:, None, :], sin[:, None, :]  # broadcast over heads
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).to(x.dtype)


def flops(shape: dict) -> int:
    return 3 * shape["tokens"] * shape["heads"] * shape["head_dim"]  # two multiplies and an add per output


def bytes_moved(shape: dict) -> int:
    tokens, heads, head_dim = shape["tokens"], shape["heads"], shape["head_dim"]
    elem = torch.finfo(getattr(torch, shape["dtype"])).bits // 8
    return 2 * tokens * heads * head_dim * elem + 2 * tokens * (head_dim // 2) * 4  # x, out; cos, sin
