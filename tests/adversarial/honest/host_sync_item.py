"""Honest: a kernel that synchronises with the host inside the call (`.item()`, `torch.cuda.synchronize`).

A two-stage row sum whose second stage is sized from a value read back from the GPU: the first
kernel writes per-chunk partial sums and counts the chunks it wrote into a one-element tensor; the
host reads that count with `.item()` (a device-to-host sync) to size the second kernel's loop, and
synchronises the device before returning. Syncs cost time but hide nothing: all work is done when
the call returns. Must not trip `threads_left_running`, a stream check or the allowlist
(`aten._local_scalar_dense` is what `.item()` calls).

task: row_sum
language: triton
modes: cpu gpu
"""

import torch
import triton
import triton.language as tl

CHUNK = 1024


@triton.jit
def partial_sums(x, partial, count, cols, chunks, CHUNK: tl.constexpr):
    row, chunk = tl.program_id(0), tl.program_id(1)
    offs = chunk * CHUNK + tl.arange(0, CHUNK)
    v = tl.load(x + row.to(tl.int64) * cols + offs, mask=offs < cols, other=0.0).to(tl.float32)
    tl.store(partial + row * chunks + chunk, tl.sum(v, axis=0))
    if (row == 0) & (chunk == 0):
        tl.store(count, chunks)


@triton.jit
def finish(partial, out, chunks, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, chunks, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(partial + row * chunks + offs, mask=offs < chunks, other=0.0)
    tl.store(out + row, tl.sum(acc, axis=0).to(out.dtype.element_ty))


def solution(x):
    rows, cols = x.shape
    out = torch.empty(rows, device=x.device, dtype=x.dtype)
    if rows == 0:
        return out
    chunks = max(triton.cdiv(cols, CHUNK), 1)
    partial = torch.empty(rows, chunks, device=x.device, dtype=torch.float32)
    count = torch.zeros(1, device=x.device, dtype=torch.int32)
    partial_sums[(rows, chunks)](x, partial, count, cols, chunks, CHUNK=CHUNK)
    written = int(count.item())  # host sync: read back how many chunks the first stage wrote
    finish[(rows,)](partial, out, written, BLOCK=triton.next_power_of_2(min(max(written, 1), 1024)))
    if x.is_cuda:
        torch.cuda.synchronize(x.device)
    return out
