import math

import torch

# The reference is the textbook formula in float32: the score matrix of a block of query rows, a
# softmax, a product with v. It walks the query rows in chunks only so that its own score matrix
# stays near 1 GiB at the longest sequences; a submission may not materialise it at all.
CHUNK_BYTES = 1 << 30


def make_inputs(shape: dict, seed: int, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device=device).manual_seed(seed)
    b, h, s, d = shape["batch"], shape["heads"], shape["seq"], shape["head_dim"]
    dtype = getattr(torch, shape["dtype"])

    def randn(*size):
        return torch.randn(*size, generator=g, device=device)

    # Per-head query scales make some heads' attention sharp and others' broad (score spreads of
    # about 1.4 to 2.4 standard deviations), so neither "average v" nor "take the best key" passes.
    # The keys share a per-head offset, which shifts each query's scores by a constant: a kernel
    # must subtract the running row maximum. The values have a per-head scale and offset, so the
    # output is not centred on zero.
    q = randn(b, h, s, d) * (1 + 0.7 * torch.rand(b, h, 1, 1, generator=g, device=device))
    k = randn(b, h, s, d) + randn(b, h, 1, d)
    v = randn(b, h, s, d) * (0.5 + 1.5 * torch.rand(b, h, 1, 1, generator=g, device=device)) + randn(b, h, 1, d)
    return q.to(dtype), k.to(dtype), v.to(dtype)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """softmax(q k^T / sqrt(d), masked) v in float32, rounded once to q's dtype. k and v may have
    fewer heads than q (grouped-query attention): query head i reads key/value head i // group."""
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


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: int) -> torch.Tensor:
    return attention(q, k, v, causal=bool(causal))


def flops(shape: dict) -> int:
    # Two products of s x s x d per head (q k^T and p v), 2 FLOPs per multiply-add; the softmax's
    # O(s^2) exponentials are not counted, as in the FlashAttention papers.
    # Causal attention does about half: the keys above the diagonal are skipped.
    full = 4 * shape["batch"] * shape["heads"] * shape["seq"] ** 2 * shape["head_dim"]
    return full // 2 if shape["causal"] else full


def bytes_moved(shape: dict) -> int:
    # q, k and v read once, out written once.
    return 4 * shape["batch"] * shape["heads"] * shape["seq"] * shape["head_dim"] * 2


def max_scratch_bytes(shape: dict) -> int:
    """The most memory a submission may allocate beyond its output during one call: room for
    per-row statistics (a running max and sum, or a logsumexp, in float32) and 64 MiB of slack,
    far below the 2*batch*heads*seq^2 bytes of a materialised bf16 score matrix at long sequences."""
    return (64 << 20) + 4 * shape["batch"] * shape["heads"] * shape["seq"] * 4
