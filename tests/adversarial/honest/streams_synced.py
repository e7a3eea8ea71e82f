"""Honest: a side stream, properly synchronized with the caller's stream.

Splits the vector in two halves and launches one on the caller's stream and one on a side
stream that first waits for the caller's stream; before returning, the caller's stream waits for
the side stream, and the output is marked as used on it. Every byte of work is ordered before
anything the caller does next, so timing on the caller's stream counts it. Must not trip
`threads_left_running`, `below_floor` or any stream check.

task: vector_add
language: triton
modes: cpu gpu
"""

import torch
import triton
import triton.language as tl

_side = {}


@triton.jit
def add(x, y, out, start, n, BLOCK: tl.constexpr):
    offs = start + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)


def solution(x, y):
    n = x.numel()
    out = torch.empty_like(x)
    half = (n // 2 // 1024) * 1024
    if not x.is_cuda:
        add[(triton.cdiv(n, 1024),)](x, y, out, 0, n, BLOCK=1024)
        return out
    main = torch.cuda.current_stream(x.device)
    side = _side.setdefault(x.device, torch.cuda.Stream(x.device))
    side.wait_stream(main)
    with torch.cuda.stream(side):
        if n - half > 0:
            add[(triton.cdiv(n - half, 1024),)](x, y, out, half, n, BLOCK=1024)
    if half > 0:
        add[(half // 1024,)](x, y, out, 0, half, BLOCK=1024)
    main.wait_stream(side)
    out.record_stream(side)
    return out
