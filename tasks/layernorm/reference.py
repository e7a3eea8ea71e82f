import torch

EPS = 1e-5


def make_inputs(shape: dict, seed: int, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device=device).manual_seed(seed)
    rows, cols, dtype = shape["rows"], shape["cols"], getattr(torch, shape["dtype"])
    # Activations with a per-row offset and scale, as in a residual stream; the affine parameters
    # near their initial values (weight 1, bias 0) but not at them.
    scale = 0.5 + 2 * torch.rand(rows, 1, generator=g, device=device)
    offset = torch.randn(rows, 1, generator=g, device=device)
    x = torch.randn(rows, cols, generator=g, device=device) * scale + offset
    weight = 1 + 0.2 * torch.randn(cols, generator=g, device=device)
    bias = 0.2 * torch.randn(cols, generator=g, device=device)
    return x.to(dtype), weight.to(dtype), bias.to(dtype)


def reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps=EPS)


def expected(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """The prompt's formula in float64, rounded once. torch's CPU kernel rounds like y = x*a + (b - mean*a)
    with a = rstd*w: at one column a = w/sqrt(eps) ~ 316, x*a ~ 1000 cancels to a few of its float32
    ulps, and a bias near 1e-3 comes out up to 6 % off in bfloat16 (1 seed in 1000)."""
    x64 = x.double()
    centred = x64 - x64.mean(-1, keepdim=True)
    y = centred * torch.rsqrt(centred.square().mean(-1, keepdim=True) + EPS) * weight.double() + bias.double()
    return y.to(x.dtype)


def flops(shape: dict) -> int:
    return 8 * shape["rows"] * shape["cols"]  # sum, subtract, square, sum, scale, weight, bias (+ rounding)


def bytes_moved(shape: dict) -> int:
    size = torch.finfo(getattr(torch, shape["dtype"])).bits // 8
    return (2 * shape["rows"] * shape["cols"] + 2 * shape["cols"]) * size  # read x, weight, bias; write y
