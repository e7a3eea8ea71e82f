import math

import torch
import triton
import triton.language as tl


@triton.jit
def attention_row_kernel(q_ptr, k_ptr, v_ptr, out_ptr, seq, scale,
                         HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr):
    # One program per query row of one (batch, head). It walks all keys in BLOCK_N-row pieces with
    # an online softmax: m is the running maximum score, total the running sum of exp(score - m), acc
    # the running sum of exp(score - m) * v. Correct, and it never stores the score matrix, but slow:
    # no tensor cores (the dot products are elementwise multiplies and sums), and every row re-reads
    # all of k and v. A fast kernel gives a block a tile of rows so each k/v tile serves all of them.
    row = tl.program_id(0)
    head = tl.program_id(1).to(tl.int64) * seq * HEAD_DIM  # start of this (batch, head) in q, k, v, out
    d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + head + row * HEAD_DIM + d).to(tl.float32)
    m = -float("inf")
    total = 0.0
    acc = tl.zeros([HEAD_DIM], dtype=tl.float32)
    for start in range(0, seq, BLOCK_N):
        n = start + tl.arange(0, BLOCK_N)
        valid = n < seq
        k = tl.load(k_ptr + head + n[:, None] * HEAD_DIM + d[None, :], mask=valid[:, None], other=0.0)
        s = tl.sum(k.to(tl.float32) * q[None, :], axis=1) * scale
        s = tl.where(valid, s, -float("inf"))  # keys past the end get no weight
        m_new = tl.maximum(m, tl.max(s, axis=0))
        p = tl.exp(s - m_new)
        alpha = tl.exp(m - m_new)  # rescales what was summed under the old maximum
        v = tl.load(v_ptr + head + n[:, None] * HEAD_DIM + d[None, :], mask=valid[:, None], other=0.0)
        acc = acc * alpha + tl.sum(p[:, None] * v.to(tl.float32), axis=0)
        total = total * alpha + tl.sum(p, axis=0)
        m = m_new
    tl.store(out_ptr + head + row * HEAD_DIM + d, (acc / total).to(out_ptr.dtype.element_ty))


def solution(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    batch, heads, seq, head_dim = q.shape
    out = torch.empty_like(q)
    if seq == 0:
        return out
    grid = (seq, batch * heads)
    attention_row_kernel[grid](q, k, v, out, seq, 1.0 / math.sqrt(head_dim), HEAD_DIM=head_dim, BLOCK_N=64)
    return out
