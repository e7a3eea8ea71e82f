import math

import torch
import triton
import triton.language as tl


@triton.jit
def paged_decode_kernel(q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, out_ptr, heads, kv_heads, block_size,
                        pages_per_seq, scale, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr):
    # One program per (sequence, query head). It walks the sequence's tokens in BLOCK_N pieces,
    # looking up each token's page in the block table, with an online softmax: m is the running
    # maximum score, total the running sum of exp(score - m), acc the running sum of
    # exp(score - m) * v. Correct, but slow: the query heads of a group each re-read their kv
    # head's keys and values, and a long context runs in one program while most SMs sit idle.
    b = tl.program_id(0)
    h = tl.program_id(1)
    kv = h // (heads // kv_heads)
    seq_len = tl.load(lens_ptr + b)
    d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + (b * heads + h) * HEAD_DIM + d).to(tl.float32)
    m = -float("inf")
    total = 0.0
    acc = tl.zeros([HEAD_DIM], dtype=tl.float32)
    for start in range(0, seq_len, BLOCK_N):
        t = start + tl.arange(0, BLOCK_N)
        valid = t < seq_len
        page = tl.load(table_ptr + b * pages_per_seq + t // block_size, mask=valid, other=0)
        # Row t % block_size of that page, kv head kv: (page * block_size + row) * kv_heads + kv.
        row = (page.to(tl.int64) * block_size + t % block_size) * kv_heads + kv
        k = tl.load(k_ptr + row[:, None] * HEAD_DIM + d[None, :], mask=valid[:, None], other=0.0)
        s = tl.sum(k.to(tl.float32) * q[None, :], axis=1) * scale
        s = tl.where(valid, s, -float("inf"))
        m_new = tl.maximum(m, tl.max(s, axis=0))
        p = tl.exp(s - m_new)
        alpha = tl.exp(m - m_new)  # rescales what was summed under the old maximum
        v = tl.load(v_ptr + row[:, None] * HEAD_DIM + d[None, :], mask=valid[:, None], other=0.0)
        acc = acc * alpha + tl.sum(p[:, None] * v.to(tl.float32), axis=0)
        total = total * alpha + tl.sum(p, axis=0)
        m = m_new
    tl.store(out_ptr + (b * heads + h) * HEAD_DIM + d, (acc / total).to(out_ptr.dtype.element_ty))


def solution(q, k_cache, v_cache, block_table, seq_lens):
    batch, heads, head_dim = q.shape
    block_size, kv_heads = k_cache.shape[1], k_cache.shape[2]
    out = torch.empty_like(q)
    paged_decode_kernel[(batch, heads)](q, k_cache, v_cache, block_table, seq_lens, out, heads, kv_heads,
                                        block_size, block_table.shape[1], 1.0 / math.sqrt(head_dim),
                                        HEAD_DIM=head_dim, BLOCK_N=64)
    return out
