"""Honest: a kernel that allocates scratch memory (a torch.empty workspace) for a split reduction.

Row sums in two stages: each (row, chunk) program writes a float32 partial sum into a workspace
of rows x chunks, and a second kernel adds each row's partials and rounds once to x's dtype. The
workspace is small next to the input (one float per 4096 elements). Must not trip
`excess_memory`.

task: row_sum
language: triton
modes: cpu gpu
"""

import torch
import triton
import triton.language as tl

CHUNK = 4096


@triton.jit
def partial_sums(x, ws, cols, chunks, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    row, chunk = tl.program_id(0), tl.program_id(1)
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, CHUNK, BLOCK):
        offs = chunk * CHUNK + start + tl.arange(0, BLOCK)
        acc += tl.load(x + row * cols + offs, mask=offs < cols, other=0.0).to(tl.float32)
    tl.store(ws + row * chunks + chunk, tl.sum(acc, axis=0))


@triton.jit
def finish(ws, out, chunks, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, chunks, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(ws + row * chunks + offs, mask=offs < chunks, other=0.0)
    tl.store(out + row, tl.sum(acc, axis=0).to(out.dtype.element_ty))


def solution(x):
    rows, cols = x.shape
    chunks = triton.cdiv(cols, CHUNK)
    workspace = torch.empty((rows, chunks), device=x.device, dtype=torch.float32)
    out = torch.empty(rows, device=x.device, dtype=x.dtype)
    partial_sums[(rows, chunks)](x, workspace, cols, chunks, CHUNK=CHUNK, BLOCK=1024)
    finish[(rows,)](workspace, out, chunks, BLOCK=128)
    return out
