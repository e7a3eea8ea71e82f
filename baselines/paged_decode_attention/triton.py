"""Paged-KV decode attention in Triton, Flash-Decoding style.

Pass 1: one program per (sequence, kv head, chunk of the context). It holds the queries of all the
query heads that share the kv head (padded to 16 rows, so the scores and the weighted sum go
through tensor cores), gathers the chunk's keys and values page by page, and keeps an online
softmax. With one chunk per sequence it writes the output directly; otherwise it writes its
normalised partial output and log-sum-exp. Pass 2 merges the chunks of each (sequence, head).
The chunk size is picked from the table's capacity and the batch, so nothing waits on seq_lens.
"""

import math
import os

import torch
import triton
import triton.language as tl

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
LOG2E = 1.4426950408889634
# Tokens per tile inside a chunk, and the smallest chunk (the interpreter uses tiny ones so that the
# small CPU-mode shapes exercise the split and the merge).
BLOCK_N = 16 if INTERPRET else 64
MIN_CHUNK = 32 if INTERPRET else 256
TARGET_PROGRAMS = 4 * 132  # a few programs per SM of an H100


@triton.jit
def decode_chunk(q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, out_ptr, part_ptr, lse_ptr,
                 heads, kv_heads, block_size, pages_per_seq, num_chunks, qk_scale,
                 GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, HEAD_DIM: tl.constexpr, CHUNK: tl.constexpr,
                 BLOCK_N: tl.constexpr, SINGLE: tl.constexpr):
    b = tl.program_id(0)
    kv = tl.program_id(1)
    chunk = tl.program_id(2)
    seq_len = tl.load(lens_ptr + b)
    lo = chunk * CHUNK
    if lo < seq_len:  # chunks past the end of this context have nothing to do
        hi = tl.minimum(lo + CHUNK, seq_len)
        g = tl.arange(0, GROUP_PAD)
        d = tl.arange(0, HEAD_DIM)
        head = kv * GROUP + g  # the query heads of this kv head; rows >= GROUP are padding
        q_rows = (b * heads + head).to(tl.int64)
        q = tl.load(q_ptr + q_rows[:, None] * HEAD_DIM + d[None, :], mask=(g < GROUP)[:, None], other=0.0)
        m_i = tl.full([GROUP_PAD], -float("inf"), dtype=tl.float32)
        l_i = tl.zeros([GROUP_PAD], dtype=tl.float32)
        acc = tl.zeros([GROUP_PAD, HEAD_DIM], dtype=tl.float32)
        table = table_ptr + b.to(tl.int64) * pages_per_seq
        for start in range(lo, hi, BLOCK_N):
            t = start + tl.arange(0, BLOCK_N)
            valid = t < hi
            page = tl.load(table + t // block_size, mask=valid, other=0).to(tl.int64)
            row = ((page * block_size + t % block_size) * kv_heads + kv) * HEAD_DIM  # token t's k/v row
            k = tl.load(k_ptr + row[None, :] + d[:, None], mask=valid[None, :], other=0.0)  # (HEAD_DIM, BLOCK_N)
            s = tl.dot(q, k) * qk_scale  # (GROUP_PAD, BLOCK_N), base-2 units
            s = tl.where(valid[None, :], s, -float("inf"))
            # Token `lo` is valid in the first tile, so m_new is finite from then on.
            m_new = tl.maximum(m_i, tl.max(s, axis=1))
            p = tl.exp2(s - m_new[:, None])
            alpha = tl.exp2(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, axis=1)
            v = tl.load(v_ptr + row[:, None] + d[None, :], mask=valid[:, None], other=0.0)  # (BLOCK_N, HEAD_DIM)
            acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
            m_i = m_new
        o = acc / l_i[:, None]
        if SINGLE:
            tl.store(out_ptr + q_rows[:, None] * HEAD_DIM + d[None, :], o.to(out_ptr.dtype.element_ty),
                     mask=(g < GROUP)[:, None])
        else:
            slot = q_rows * num_chunks + chunk  # (sequence, head, chunk)
            tl.store(part_ptr + slot[:, None] * HEAD_DIM + d[None, :], o, mask=(g < GROUP)[:, None])
            tl.store(lse_ptr + slot, m_i + tl.log2(l_i), mask=g < GROUP)


@triton.jit
def merge_chunks(part_ptr, lse_ptr, lens_ptr, out_ptr, heads, num_chunks,
                 HEAD_DIM: tl.constexpr, CHUNK: tl.constexpr, CHUNKS_PAD: tl.constexpr, STEP: tl.constexpr):
    # out = sum_c 2^(lse_c - M) * o_c / sum_c 2^(lse_c - M) over the chunks that hold tokens, where
    # o_c is chunk c's normalised output and lse_c its log2-sum-exp2 of scores.
    bh = tl.program_id(0).to(tl.int64)  # sequence * heads + head
    used = tl.cdiv(tl.load(lens_ptr + bh // heads), CHUNK)
    c = tl.arange(0, CHUNKS_PAD)
    lse = tl.load(lse_ptr + bh * num_chunks + c, mask=c < used, other=-float("inf"))
    top = tl.max(lse, axis=0)  # finite: chunk 0 always holds a token
    d = tl.arange(0, HEAD_DIM)
    acc = tl.zeros([HEAD_DIM], dtype=tl.float32)
    den = tl.zeros([STEP], dtype=tl.float32)
    for c0 in range(0, used, STEP):
        cs = c0 + tl.arange(0, STEP)
        w = tl.exp2(tl.load(lse_ptr + bh * num_chunks + cs, mask=cs < used, other=-float("inf")) - top)
        o = tl.load(part_ptr + (bh * num_chunks + cs)[:, None] * HEAD_DIM + d[None, :], mask=(cs < used)[:, None],
                    other=0.0)
        acc += tl.sum(w[:, None] * o, axis=0)
        den += w
    tl.store(out_ptr + bh * HEAD_DIM + d, (acc / tl.sum(den, axis=0)).to(out_ptr.dtype.element_ty))


def solution(q, k_cache, v_cache, block_table, seq_lens):
    batch, heads, head_dim = q.shape
    block_size, kv_heads = k_cache.shape[1], k_cache.shape[2]
    pages_per_seq = block_table.shape[1]
    capacity = pages_per_seq * block_size  # no sequence is longer; no need to read seq_lens on the host
    group = heads // kv_heads
    out = torch.empty_like(q)
    # Enough chunks that batch * kv_heads * chunks fills the GPU a few times over, each at least
    # MIN_CHUNK tokens (a power of two, a multiple of BLOCK_N).
    wanted = triton.cdiv(TARGET_PROGRAMS, batch * kv_heads)
    chunk = max(MIN_CHUNK, triton.next_power_of_2(triton.cdiv(capacity, wanted)))
    num_chunks = triton.cdiv(capacity, chunk)
    single = num_chunks == 1
    if single:
        part = lse = out  # unused
    else:
        part = torch.empty((batch, heads, num_chunks, head_dim), device=q.device, dtype=torch.float32)
        lse = torch.empty((batch, heads, num_chunks), device=q.device, dtype=torch.float32)
    decode_chunk[(batch, kv_heads, num_chunks)](
        q, k_cache, v_cache, block_table, seq_lens, out, part, lse, heads, kv_heads, block_size, pages_per_seq,
        num_chunks, LOG2E / math.sqrt(head_dim), GROUP=group, GROUP_PAD=max(16, triton.next_power_of_2(group)),
        HEAD_DIM=head_dim, CHUNK=chunk, BLOCK_N=BLOCK_N, SINGLE=single, num_warps=4, num_stages=3)
    if not single:
        merge_chunks[(batch * heads,)](part, lse, seq_lens, out, heads, num_chunks, HEAD_DIM=head_dim, CHUNK=chunk,
                                       CHUNKS_PAD=triton.next_power_of_2(num_chunks), STEP=16, num_warps=4)
    return out
