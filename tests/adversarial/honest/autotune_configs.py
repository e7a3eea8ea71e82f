"""Honest: `triton.autotune` choosing among several configurations per problem size.

A vector add autotuned over four block sizes and warp counts, keyed on `n`: the first call at each
size benchmarks every configuration (several launches, Triton's own timing and cache-flush buffer),
later calls reuse the winner. Autotuning is done on the real inputs and writes the same answer with
every configuration (no `reset_to_zero` needed). Must not trip `threads_left_running`,
`same_output`, `excess_memory` or any cache check. GPU only: under the Triton interpreter (CPU mode)
the autotuner's benchmark finds no driver and raises (`0 active drivers`), a gap of CPU mode.

task: vector_add
language: triton
modes: gpu
"""

import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK": b}, num_warps=w) for b, w in ((256, 2), (1024, 4), (2048, 8), (4096, 8))],
    key=["n"],
)
@triton.jit
def add(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)


def solution(x, y):
    n = x.numel()
    out = torch.empty_like(x)
    add[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n)
    return out
