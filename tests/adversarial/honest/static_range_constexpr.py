"""Honest: constexpr specialisation and `tl.static_range` (loops unrolled at compile time).

RMSNorm with the row swept in a compile-time number of chunks when the row fits in at most four
(`tl.static_range(CHUNKS)`, fully unrolled, no loop-carried masks), and a runtime loop otherwise;
`EVEN` (a constexpr: cols is a multiple of the block) drops the masks entirely. One source, several
specialised binaries, each picked per shape. Must not trip any cache or same-output check.

task: rmsnorm
language: triton
modes: cpu gpu
"""

import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _load(ptr, offs, cols, EVEN: tl.constexpr):
    if EVEN:
        return tl.load(ptr + offs).to(tl.float32)
    return tl.load(ptr + offs, mask=offs < cols, other=0.0).to(tl.float32)


@triton.jit
def rmsnorm(x, w, y, cols, eps, BLOCK: tl.constexpr, CHUNKS: tl.constexpr, EVEN: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * cols
    acc = tl.zeros((BLOCK,), tl.float32)
    if CHUNKS > 0:
        for c in tl.static_range(CHUNKS):
            v = _load(x + base, c * BLOCK + tl.arange(0, BLOCK), cols, EVEN)
            acc += v * v
    else:
        for start in range(0, cols, BLOCK):
            v = _load(x + base, start + tl.arange(0, BLOCK), cols, EVEN)
            acc += v * v
    scale = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / cols + eps)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = _load(x + base, offs, cols, EVEN) * scale * _load(w, offs, cols, EVEN)
        tl.store(y + base + offs, v.to(y.dtype.element_ty), mask=offs < cols)


def solution(x, weight):
    rows, cols = x.shape
    y = torch.empty_like(x)
    chunks = triton.cdiv(cols, BLOCK)
    rmsnorm[(rows,)](x, weight, y, cols, 1e-6, BLOCK=BLOCK, CHUNKS=chunks if chunks <= 4 else 0,
                     EVEN=cols % BLOCK == 0)
    return y
