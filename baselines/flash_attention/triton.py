"""FlashAttention-2-style forward in Triton: a tile of query rows per program, K/V streamed through
shared memory, online softmax in base 2, both products on tensor cores (wgmma on sm_90)."""

import math
import os

import torch
import triton
import triton.language as tl

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
LOG2E = 1.4426950408889634


def _config(seq: int) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps, num_stages) by size class, chosen here rather than autotuned: each judge
    step runs in a fresh process with an empty Triton cache, where a sweep compiles and times every config at
    every new shape (issue 14: 13 shapes, 4 configs, 28 s a step). Each (class, HEAD_DIM, CAUSAL) is
    then one compile."""
    if INTERPRET:
        # The interpreter runs each tile as numpy calls: small tiles.
        return 16, 16, 4, 1
    # H100 (sm_90): 128-row query tiles on two warpgroups. Compiled by Triton 3.6 for sm_90a: no spills;
    # 128 x 64 takes 64 KB of shared memory at head_dim 64 (two blocks per SM fit) and 128 KB at head_dim
    # 128 (one); 64 x 64 at most 112 KB (two).
    if seq < 512:
        return 64, 64, 4, 3  # short sequences: 64-row tiles make twice the programs
    return 128, 64, 8, 3


@triton.jit
def _tile(acc, l_i, m_i, q, k_base, v_base, offs_m, offs_d, lo, hi, seq, qk_scale,
          BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr):
    # Keys lo..hi-1 in BLOCK_N tiles. Only the last tile may run past seq, and with CAUSAL only the
    # tiles the diagonal crosses need the causal mask (MASKED); the others need no masks at all, so
    # their loads are plain vector loads.
    offs_n = tl.arange(0, BLOCK_N)
    for start in range(lo, hi, BLOCK_N):
        n = start + offs_n
        if MASKED:
            in_range = n < seq
            k = tl.load(k_base + n[None, :] * HEAD_DIM + offs_d[:, None], mask=in_range[None, :], other=0.0)
        else:
            k = tl.load(k_base + n[None, :] * HEAD_DIM + offs_d[:, None])
        # (BLOCK_M, BLOCK_N) scores in fp32, in base-2 units; k was loaded transposed, (HEAD_DIM, BLOCK_N).
        s = tl.dot(q, k) * qk_scale
        if MASKED:
            visible = in_range[None, :]
            if CAUSAL:
                visible = visible & (n[None, :] <= offs_m[:, None])
            s = tl.where(visible, s, -float("inf"))
        # Every row has seen a finite score by the first tile it processes (key `lo` is in range),
        # so m_new is finite and exp2(m_i - m_new) never meets -inf - -inf.
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        if MASKED:
            v = tl.load(v_base + n[:, None] * HEAD_DIM + offs_d[None, :], mask=in_range[:, None], other=0.0)
        else:
            v = tl.load(v_base + n[:, None] * HEAD_DIM + offs_d[None, :])
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc)  # P in bf16, as the tensor cores take it; fp32 accumulate
        m_i = m_new
    return acc, l_i, m_i


# seq is not specialised (Triton would compile apart seq == 1 and seq % 16 == 0): it only bounds loops
# and masks, and the rows' alignment comes from HEAD_DIM.
@triton.jit(do_not_specialize=["seq"])
def attention_fwd(q_ptr, k_ptr, v_ptr, out_ptr, seq, qk_scale,
                  HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # program_id(0) walks the query tiles of one head before moving to the next head, so the programs
    # running at once share K/V, which then comes from L2.
    start_m = tl.program_id(0) * BLOCK_M
    head = tl.program_id(1).to(tl.int64) * seq * HEAD_DIM
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + head + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=(offs_m < seq)[:, None], other=0.0)
    m_i = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    if CAUSAL:
        # Key tiles wholly below the diagonal need no mask; those from the diagonal's first tile to
        # this query tile's last row do; the rest are never visited (half the work).
        diagonal = start_m // BLOCK_N * BLOCK_N
        acc, l_i, m_i = _tile(acc, l_i, m_i, q, k_ptr + head, v_ptr + head, offs_m, offs_d, 0, diagonal, seq,
                              qk_scale, BLOCK_N, HEAD_DIM, False, False)
        acc, l_i, m_i = _tile(acc, l_i, m_i, q, k_ptr + head, v_ptr + head, offs_m, offs_d, diagonal,
                              tl.minimum(seq, start_m + BLOCK_M), seq, qk_scale, BLOCK_N, HEAD_DIM, True, True)
    else:
        full = seq // BLOCK_N * BLOCK_N
        acc, l_i, m_i = _tile(acc, l_i, m_i, q, k_ptr + head, v_ptr + head, offs_m, offs_d, 0, full, seq,
                              qk_scale, BLOCK_N, HEAD_DIM, False, False)
        if full < seq:  # the partial last key tile
            acc, l_i, m_i = _tile(acc, l_i, m_i, q, k_ptr + head, v_ptr + head, offs_m, offs_d, full, seq, seq,
                                  qk_scale, BLOCK_N, HEAD_DIM, True, False)
    out = acc / l_i[:, None]
    tl.store(out_ptr + head + offs_m[:, None] * HEAD_DIM + offs_d[None, :], out.to(out_ptr.dtype.element_ty),
             mask=(offs_m < seq)[:, None])


def solution(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: int) -> torch.Tensor:
    batch, heads, seq, head_dim = q.shape
    out = torch.empty_like(q)
    if seq == 0:
        return out

    block_m, block_n, warps, stages = _config(seq)
    attention_fwd[(triton.cdiv(seq, block_m), batch * heads)](
        q, k, v, out, seq, LOG2E / math.sqrt(head_dim), HEAD_DIM=head_dim, CAUSAL=bool(causal),
        BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps, num_stages=stages)
    return out
