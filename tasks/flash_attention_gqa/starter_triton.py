import math

import torch
import triton
import triton.language as tl


@triton.jit
def attention_row_kernel(q_ptr, k_ptr, v_ptr, out_ptr, heads, kv_heads, seq, scale,
                         HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr):
    # One program per query row of one (batch, query head). It walks keys 0..row (the causal mask)
    # in BLOCK_N-row pieces with an online softmax: m is the running maximum score, total the running
    # sum of exp(score - m), acc the running sum of exp(score - m) * v. Correct, and it never stores
    # the score matrix, but slow: no tensor cores, and every row re-reads its kv head's k and v. A
    # fast kernel gives a block a tile of rows so that each k/v tile serves all of them.
    row = tl.program_id(0)
    bh = tl.program_id(1)  # batch * heads + query head
    b, h = bh // heads, bh % heads
    kv = b * kv_heads + h // (heads // kv_heads)  # the kv head this query head reads
    q_base = bh.to(tl.int64) * seq * HEAD_DIM
    kv_base = kv.to(tl.int64) * seq * HEAD_DIM
    d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + q_base + row * HEAD_DIM + d).to(tl.float32)
    m = -float("inf")
    total = 0.0
    acc = tl.zeros([HEAD_DIM], dtype=tl.float32)
    for start in range(0, row + 1, BLOCK_N):
        n = start + tl.arange(0, BLOCK_N)
        valid = n <= row  # causal: keys after this row get no weight (row < seq, so n < seq too)
        k = tl.load(k_ptr + kv_base + n[:, None] * HEAD_DIM + d[None, :], mask=valid[:, None], other=0.0)
        s = tl.sum(k.to(tl.float32) * q[None, :], axis=1) * scale
        s = tl.where(valid, s, -float("inf"))
        m_new = tl.maximum(m, tl.max(s, axis=0))
        p = tl.exp(s - m_new)
        alpha = tl.exp(m - m_new)  # rescales what was summed under the old maximum
        v = tl.load(v_ptr + kv_base + n[:, None] * HEAD_DIM + d[None, :], mask=valid[:, None], other=0.0)
        acc = acc * alpha + tl.sum(p[:, None] * v.to(tl.float32), axis=0)
        total = total * alpha + tl.sum(p, axis=0)
        m = m_new
    tl.store(out_ptr + q_base + row * HEAD_DIM + d, (acc / total).to(out_ptr.dtype.element_ty))


def solution(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    batch, heads, seq, head_dim = q.shape
    kv_heads = k.shape[1]
    out = torch.empty_like(q)
    if seq == 0:
        return out
    grid = (seq, batch * heads)
    attention_row_kernel[grid](q, k, v, out, heads, kv_heads, seq, 1.0 / math.sqrt(head_dim),
                               HEAD_DIM=head_dim, BLOCK_N=64)
    return out
