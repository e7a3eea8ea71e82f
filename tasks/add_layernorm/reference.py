import torch

EPS = 1e-5


def make_inputs(shape: dict, seed: int, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device=device).manual_seed(seed)
    rows, cols, dtype = shape["rows"], shape["cols"], getattr(torch, shape["dtype"])
    # A residual stream with a per-row offset and scale, plus a sublayer's smaller output.
    scale = 0.5 + 2 * torch.rand(rows, 1, generator=g, device=device)
    offset = torch.randn(rows, 1, generator=g, device=device)
    residual = torch.randn(rows, cols, generator=g, device=device) * scale + offset
    x = 0.5 * torch.randn(rows, cols, generator=g, device=device)
    weight = 1 + 0.2 * torch.randn(cols, generator=g, device=device)
    bias = 0.2 * torch.randn(cols, generator=g, device=device)
    return x.to(dtype), residual.to(dtype), weight.to(dtype), bias.to(dtype)


def reference(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor):
    h = x + residual  # in x's dtype: for bfloat16, h is rounded to bfloat16 before the norm sees it
    y = torch.nn.functional.layer_norm(h, (h.shape[-1],), weight, bias, eps=EPS)
    return h, y


def expected(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor):
    """h as the reference rounds it; y from h by the formula in float64, rounded once (torch's CPU
    LayerNorm loses a small bias's digits at one column: see tasks/layernorm/reference.py)."""
    h = x + residual
    h64 = h.double()
    centred = h64 - h64.mean(-1, keepdim=True)
    y = centred * torch.rsqrt(centred.square().mean(-1, keepdim=True) + EPS) * weight.double() + bias.double()
    return h, y.to(h.dtype)


def flops(shape: dict) -> int:
    return 9 * shape["rows"] * shape["cols"]  # the add, then the LayerNorm's eight


def bytes_moved(shape: dict) -> int:
    size = torch.finfo(getattr(torch, shape["dtype"])).bits // 8
    # read x, residual, weight and bias; write h and y
    return (4 * shape["rows"] * shape["cols"] + 2 * shape["cols"]) * size
