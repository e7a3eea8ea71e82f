import math

import torch
import triton
import triton.language as tl


@triton.jit
def scores(q, m, k_base, start, seq, scale, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr):
    # The (BLOCK_M, BLOCK_N) scores of query rows m against keys start..start+BLOCK_N-1, with the causal
    # mask: row m sees keys 0..m only; keys past the end or after the row get -inf (no weight).
    n = start + tl.arange(0, BLOCK_N)
    d = tl.arange(0, HEAD_DIM)
    k = tl.load(k_base + n[None, :] * HEAD_DIM + d[:, None], mask=(n < seq)[None, :], other=0.0)  # k^T tile
    visible = (n < seq)[None, :] & (n[None, :] <= m[:, None])
    return tl.where(visible, tl.dot(q, k) * scale, -float("inf"))


@triton.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, out_ptr, heads, kv_heads, seq, scale,
                     HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # One program per BLOCK_M query rows of one (batch, query head). Like a three-pass softmax, it walks
    # the keys up to its last row three times, recomputing the scores tile by tile instead of storing
    # them: once for each row's maximum, once for the sum of exp(score - max), once to accumulate
    # softmax * v. Correct and it never stores the score matrix, but it does the Q K^T product three
    # times and masks every tile; an online softmax needs one pass, and only the tiles that straddle
    # the diagonal need a mask.
    bh = tl.program_id(1)  # batch * heads + query head
    kv = bh // heads * kv_heads + bh % heads // (heads // kv_heads)  # the kv head this query head reads
    q_base = bh.to(tl.int64) * seq * HEAD_DIM
    k_base = k_ptr + kv.to(tl.int64) * seq * HEAD_DIM
    v_base = v_ptr + kv.to(tl.int64) * seq * HEAD_DIM
    m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    d = tl.arange(0, HEAD_DIM)
    # Rows past the end load zeros and are not stored; key 0 is visible to every row, so no row
    # is all -inf.
    q = tl.load(q_ptr + q_base + m[:, None] * HEAD_DIM + d[None, :], mask=(m < seq)[:, None], other=0.0)
    end = tl.minimum(seq, (tl.program_id(0) + 1) * BLOCK_M)  # no key after the tile's last row is visible
    row_max = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    for start in range(0, end, BLOCK_N):
        row_max = tl.maximum(row_max, tl.max(scores(q, m, k_base, start, seq, scale, HEAD_DIM, BLOCK_N), axis=1))
    row_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
    for start in range(0, end, BLOCK_N):
        s = scores(q, m, k_base, start, seq, scale, HEAD_DIM, BLOCK_N)
        row_sum += tl.sum(tl.exp(s - row_max[:, None]), axis=1)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    for start in range(0, end, BLOCK_N):
        s = scores(q, m, k_base, start, seq, scale, HEAD_DIM, BLOCK_N)
        p = tl.exp(s - row_max[:, None]) / row_sum[:, None]
        n = start + tl.arange(0, BLOCK_N)
        v = tl.load(v_base + n[:, None] * HEAD_DIM + d[None, :], mask=(n < seq)[:, None], other=0.0)
        acc += tl.dot(p.to(v.dtype), v)  # tensor cores take the probabilities in bf16
    tl.store(out_ptr + q_base + m[:, None] * HEAD_DIM + d[None, :], acc.to(out_ptr.dtype.element_ty),
             mask=(m < seq)[:, None])


def solution(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    batch, heads, seq, head_dim = q.shape
    kv_heads = k.shape[1]
    out = torch.empty_like(q)
    if seq == 0:
        return out
    block_m = block_n = 32
    grid = (triton.cdiv(seq, block_m), batch * heads)
    attention_kernel[grid](q, k, v, out, heads, kv_heads, seq, 1.0 / math.sqrt(head_dim), HEAD_DIM=head_dim,
                           BLOCK_M=block_m, BLOCK_N=block_n)
    return out
