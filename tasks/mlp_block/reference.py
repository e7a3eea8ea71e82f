import torch
import torch.nn.functional as F


def make_inputs(shape: dict, seed: int, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device=device).manual_seed(seed)
    tokens, d_model, d_ff = shape["tokens"], shape["d_model"], shape["d_ff"]
    # A residual-stream activation with a random per-call scale, weights at the usual 1/sqrt(fan_in)
    # scale (so both GEMMs keep unit-sized outputs), small random biases.
    scale = 0.5 + torch.rand((), generator=g, device=device)
    x = scale * torch.randn(tokens, d_model, generator=g, device=device)
    w1 = torch.randn(d_model, d_ff, generator=g, device=device) / d_model**0.5
    b1 = 0.2 * torch.randn(d_ff, generator=g, device=device)
    w2 = torch.randn(d_ff, d_model, generator=g, device=device) / d_ff**0.5
    b2 = 0.2 * torch.randn(d_model, generator=g, device=device)
    return x.bfloat16(), w1.bfloat16(), b1.bfloat16(), w2.bfloat16(), b2.bfloat16()


def reference(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
    # Eager: GEMM, bias add, GELU, GEMM, bias add; every intermediate goes through DRAM in bf16.
    h = F.gelu(x @ w1 + b1, approximate="tanh")
    return h @ w2 + b2


def flops(shape: dict) -> int:
    tokens, d_model, d_ff = shape["tokens"], shape["d_model"], shape["d_ff"]
    return 4 * tokens * d_model * d_ff + 10 * tokens * d_ff + tokens * d_model  # two GEMMs, GELU, biases


def bytes_moved(shape: dict) -> int:
    tokens, d_model, d_ff = shape["tokens"], shape["d_model"], shape["d_ff"]
    return 2 * (2 * tokens * d_model + 2 * d_model * d_ff + d_ff + d_model)  # x, w1, b1, w2, b2 in; y out
