import math

import torch

# The reference is the textbook formula in float32: k and v copied out to one head per query head,
# the score matrix of a block of query rows, a causal mask, a softmax, a product with v. It walks
# the query rows in chunks only so that its own score matrix stays near 1 GiB at the longest
# sequences; a submission may materialise neither the score matrix nor the copied k and v.
CHUNK_BYTES = 1 << 30


def make_inputs(shape: dict, seed: int, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device=device).manual_seed(seed)
    b, hq, hkv, s, d = shape["batch"], shape["heads"], shape["kv_heads"], shape["seq"], shape["head_dim"]
    dtype = getattr(torch, shape["dtype"])

    def randn(*size):
        return torch.randn(*size, generator=g, device=device)

    def rand(*size):
        return torch.rand(*size, generator=g, device=device)

    # Per-head query scales make some heads' attention sharp and others' broad, so neither
    # "average v" nor "take the best key" passes. The keys of each kv head share an offset, which
    # shifts each query's scores by a constant (a kernel must subtract the running maximum); the
    # values have a per-head scale and offset, so the output is not centred on zero.
    q = randn(b, hq, s, d) * (1 + 0.7 * rand(b, hq, 1, 1))
    k = randn(b, hkv, s, d) + randn(b, hkv, 1, d)
    v = randn(b, hkv, s, d) * (0.5 + 1.5 * rand(b, hkv, 1, 1)) + randn(b, hkv, 1, d)
    return q.to(dtype), k.to(dtype), v.to(dtype)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """softmax(q k^T / sqrt(d), masked) v in float32, rounded once to q's dtype. Query head i reads
    key/value head i // (heads // kv_heads); causal: query row i sees keys 0..i."""
    b, h, s, d = q.shape
    group = h // k.shape[1]
    if group > 1:
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scale = 1 / math.sqrt(d)
    out = torch.empty_like(q)
    rows = max(1, CHUNK_BYTES // (4 * b * h * max(s, 1)))
    for r0 in range(0, s, rows):
        r1 = min(s, r0 + rows)
        keys = r1 if causal else s  # causal: rows r0..r1-1 see keys 0..r1-1 at most
        scores = (q[:, :, r0:r1].float() @ k[:, :, :keys].float().transpose(-1, -2)) * scale
        if causal:
            hidden = torch.arange(keys, device=q.device)[None, :] > torch.arange(r0, r1, device=q.device)[:, None]
            scores.masked_fill_(hidden, float("-inf"))
        out[:, :, r0:r1] = (torch.softmax(scores, dim=-1) @ v[:, :, :keys].float()).to(q.dtype)
    return out


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return attention(q, k, v, causal=True)


def flops(shape: dict) -> int:
    # Two products of s x s x d per query head, halved by the causal mask (the convention of the
    # FlashAttention papers); the softmax's exponentials are not counted.
    return 2 * shape["batch"] * shape["heads"] * shape["seq"] ** 2 * shape["head_dim"]


def bytes_moved(shape: dict) -> int:
    # q and out once per query head, k and v once per kv head.
    heads = 2 * shape["heads"] + 2 * shape["kv_heads"]
    return heads * shape["batch"] * shape["seq"] * shape["head_dim"] * 2


def max_scratch_bytes(shape: dict) -> int:
    """The most memory a submission may allocate beyond its output during one call: room for
    per-row statistics (a running max and sum, or a logsumexp, in float32) and 64 MiB of slack.
    A materialised score matrix (2*batch*heads*seq^2 bytes in bf16) or k and v copied out to one
    head per query head does not fit at the benchmark sizes."""
    return (64 << 20) + 4 * shape["batch"] * shape["heads"] * shape["seq"] * 4
