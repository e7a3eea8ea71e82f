import functools

import torch
import triton
import triton.language as tl

# Stage 1: a fixed number of programs (a few per SM, all resident at once) walk the vector in
# BLOCK-sized chunks, chunk c going to program c % programs, each lane keeping a float32 partial
# sum. 4096 floats over 8 warps is four 16-byte loads per thread per chunk.
# Stage 2: one program adds the per-program partials as a tree. No atomics, so the result is
# deterministic; the second launch costs a few microseconds.
BLOCK = 4096
NUM_WARPS = 8
PROGRAMS_PER_SM = 8  # 8 x 256 threads = 2048, a full H100 SM


@functools.cache
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


@triton.jit
def partial_sums(x_ptr, part_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    full = n // BLOCK
    ptrs = x_ptr + pid.to(tl.int64) * BLOCK + offs  # pointer arithmetic: no int32 overflow past 2**31
    for _ in range(pid, full, programs):
        # Whole chunks load unmasked, so they stay 16-byte vectors whatever n is.
        acc += tl.load(ptrs)
        ptrs += programs.to(tl.int64) * BLOCK
    if pid == full % programs:  # the partial last chunk, from the program whose turn it would be
        idx = full.to(tl.int64) * BLOCK + offs
        acc += tl.load(x_ptr + idx, mask=idx < n, other=0.0)
    tl.store(part_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def add_partials(part_ptr, out_ptr, count, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr, tl.sum(tl.load(part_ptr + offs, mask=offs < count, other=0.0), axis=0))


def solution(x: torch.Tensor) -> torch.Tensor:
    n = x.numel()
    sms = _sm_count(x.device.index or 0) if x.is_cuda else 4
    programs = max(1, min(triton.cdiv(n, BLOCK), PROGRAMS_PER_SM * sms))
    partials = torch.empty(programs, device=x.device, dtype=torch.float32)
    out = torch.empty((), device=x.device, dtype=torch.float32)
    partial_sums[(programs,)](x, partials, n, BLOCK=BLOCK, num_warps=NUM_WARPS)
    add_partials[(1,)](partials, out, programs, BLOCK=triton.next_power_of_2(programs), num_warps=4)
    return out
