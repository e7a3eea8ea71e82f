import torch
import torch.nn.functional as F

EPS = 1e-5
HEAD_DIM = 64  # d_model = heads * HEAD_DIM; d_ff = 4 * d_model


def make_inputs(shape: dict, seed: int, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device=device).manual_seed(seed)
    batch, seq, heads = shape["batch"], shape["seq"], shape["heads"]
    d = heads * HEAD_DIM
    d_ff = 4 * d

    def randn(*size, scale=1.0, offset=0.0):
        return (offset + scale * torch.randn(*size, generator=g, device=device)).bfloat16()

    # A residual stream with a random overall scale; LayerNorm parameters near (not at) their
    # initial values; weights at the usual 1/sqrt(fan_in) scale, so every stage stays unit-sized.
    x_scale = 0.5 + float(torch.rand((), generator=g, device=device))
    x = randn(batch, seq, d, scale=x_scale)
    ln1_weight, ln1_bias = randn(d, scale=0.1, offset=1.0), randn(d, scale=0.1)
    wqkv = randn(d, 3 * d, scale=d**-0.5)
    wo = randn(d, d, scale=d**-0.5)
    ln2_weight, ln2_bias = randn(d, scale=0.1, offset=1.0), randn(d, scale=0.1)
    w1, b1 = randn(d, d_ff, scale=d**-0.5), randn(d_ff, scale=0.1)
    w2, b2 = randn(d_ff, d, scale=d_ff**-0.5), randn(d, scale=0.1)
    return x, ln1_weight, ln1_bias, wqkv, wo, ln2_weight, ln2_bias, w1, b1, w2, b2


def reference(x, ln1_weight, ln1_bias, wqkv, wo, ln2_weight, ln2_bias, w1, b1, w2, b2) -> torch.Tensor:
    batch, seq, d = x.shape
    heads = d // HEAD_DIM
    # Attention sub-block: pre-LN, fused QKV projection, causal softmax attention per head, output
    # projection, residual.
    a = F.layer_norm(x, (d,), ln1_weight, ln1_bias, eps=EPS)
    qkv = (a @ wqkv).view(batch, seq, 3, heads, HEAD_DIM).permute(2, 0, 3, 1, 4)  # (3, batch, heads, seq, hd)
    o = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=True)    # (batch, heads, seq, hd)
    h = x + o.transpose(1, 2).reshape(batch, seq, d) @ wo
    # MLP sub-block: pre-LN, GEMM + bias + tanh-GELU, GEMM + bias, residual.
    m = F.layer_norm(h, (d,), ln2_weight, ln2_bias, eps=EPS)
    return h + (F.gelu(m @ w1 + b1, approximate="tanh") @ w2 + b2)


def flops(shape: dict) -> int:
    batch, seq, heads = shape["batch"], shape["seq"], shape["heads"]
    d, tokens = heads * HEAD_DIM, batch * seq
    gemms = 2 * tokens * d * (3 * d + d + 4 * d + 4 * d)      # QKV, output projection, two MLP GEMMs
    attention = 2 * batch * heads * seq * (seq + 1) * HEAD_DIM  # QK^T and PV over the causal half
    return gemms + attention + 60 * tokens * d                  # + LayerNorms, softmax, GELU, residuals


def bytes_moved(shape: dict) -> int:
    batch, seq, heads = shape["batch"], shape["seq"], shape["heads"]
    d, tokens = heads * HEAD_DIM, batch * seq
    weights = d * 3 * d + d * d + 2 * d * 4 * d + 4 * d + 5 * d  # wqkv, wo, w1, w2, b1, LN params, b2
    return 2 * (2 * tokens * d + weights)                          # read x and the weights, write y
