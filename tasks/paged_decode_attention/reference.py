import math

import torch

# The reference gathers each sequence's pages into a contiguous float32 copy and runs the textbook
# formula on it, a chunk of sequences at a time so that the copy stays near 1 GiB.
CHUNK_BYTES = 1 << 30
GOLDEN = (math.sqrt(5) - 1) / 2


def context_lengths(shape: dict) -> list[int]:
    """The context lengths of a batch, before make_inputs shuffles them and moves tokens between
    pairs of sequences (which keeps their sum, so bytes_moved is exact): one full-length sequence,
    one of a single token, and the rest spread over 1..max_seq with short ones more common."""
    n, longest = shape["batch"], shape["max_seq"]
    spread = [1.0, 0.0] + [(i * GOLDEN) % 1.0 for i in range(2, n)]
    return [1 + round((longest - 1) * u * u) for u in spread[:n]]


def make_inputs(shape: dict, seed: int, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device=device).manual_seed(seed)
    b, h, kvh, d = shape["batch"], shape["heads"], shape["kv_heads"], shape["head_dim"]
    page, longest = shape["block_size"], shape["max_seq"]
    dtype = getattr(torch, shape["dtype"])
    pages_per_seq = -(-longest // page)
    num_blocks = b * pages_per_seq

    def randn(*size):
        return torch.randn(*size, generator=g, device=device)

    # Lengths: shuffled, then pairs of neighbours trade a random number of tokens (sum unchanged).
    lens = torch.tensor(context_lengths(shape), device=device)[torch.randperm(b, generator=g, device=device)]
    pairs = b // 2 * 2
    first, second = lens[0:pairs:2], lens[1:pairs:2]
    room = torch.minimum(first - 1, longest - second)
    moved = (torch.rand(b // 2, generator=g, device=device) * (room + 1)).long().clamp(max=room)
    lens[0:pairs:2], lens[1:pairs:2] = first - moved, second + moved
    # Every page of the cache belongs to one sequence, in a random order; the table's entries past a
    # sequence's length point at real pages too (of other positions' data), so reading past the end
    # gives wrong results rather than a fault.
    block_table = torch.randperm(num_blocks, generator=g, device=device).view(b, pages_per_seq)
    q = randn(b, h, d) * (1 + 0.7 * torch.rand(b, h, 1, generator=g, device=device))
    k_cache = randn(num_blocks, page, kvh, d) + randn(1, 1, kvh, d)
    v_cache = randn(num_blocks, page, kvh, d) * (0.5 + 1.5 * torch.rand(1, 1, kvh, 1, generator=g, device=device))
    v_cache = v_cache + randn(1, 1, kvh, d)
    return (q.to(dtype), k_cache.to(dtype), v_cache.to(dtype), block_table.to(torch.int32), lens.to(torch.int32))


def reference(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
              seq_lens: torch.Tensor) -> torch.Tensor:
    b, h, d = q.shape
    page, kvh = k_cache.shape[1], k_cache.shape[2]
    group = h // kvh
    length = block_table.shape[1] * page  # the longest context the table can hold
    out = torch.empty_like(q)
    rows = max(1, CHUNK_BYTES // (2 * 4 * length * kvh * d))
    for b0 in range(0, b, rows):
        b1 = min(b, b0 + rows)
        pages = block_table[b0:b1].long()
        # (sequences, kv_heads, length, d): the pages in the table's order, then the heads split off.
        k = k_cache[pages].reshape(b1 - b0, length, kvh, d).transpose(1, 2).float()
        v = v_cache[pages].reshape(b1 - b0, length, kvh, d).transpose(1, 2).float()
        qg = q[b0:b1].float().view(b1 - b0, kvh, group, d)  # query head i reads kv head i // group
        scores = (qg @ k.transpose(-1, -2)) / math.sqrt(d)  # (sequences, kv_heads, group, length)
        past_end = torch.arange(length, device=q.device)[None, :] >= seq_lens[b0:b1, None]
        scores.masked_fill_(past_end[:, None, None, :], float("-inf"))
        out[b0:b1] = (torch.softmax(scores, dim=-1) @ v).reshape(b1 - b0, h, d).to(q.dtype)
    return out


def flops(shape: dict) -> int:
    # Two dot products of head_dim per query head and context token.
    return 4 * shape["heads"] * shape["head_dim"] * sum(context_lengths(shape))


def bytes_moved(shape: dict) -> int:
    # The keys and values of every context token, once per kv head (the query heads of a group share
    # them); q and out; the block table and the lengths.
    kv = 2 * sum(context_lengths(shape)) * shape["kv_heads"] * shape["head_dim"] * 2
    pages_per_seq = -(-shape["max_seq"] // shape["block_size"])
    return kv + 2 * shape["batch"] * shape["heads"] * shape["head_dim"] * 2 + 4 * shape["batch"] * (pages_per_seq + 1)


def max_scratch_bytes(shape: dict) -> int:
    """The most memory a submission may allocate beyond its output during one call: 64 MiB plus, for
    a split of the contexts into chunks (flash-decoding), a float32 partial output and two
    statistics per query head and 64 tokens of capacity. Gathering the pages into a contiguous
    copy of k and v does not fit at the benchmark sizes."""
    chunks = -(-shape["max_seq"] // 64)
    return (64 << 20) + shape["batch"] * shape["heads"] * chunks * (shape["head_dim"] + 2) * 4
