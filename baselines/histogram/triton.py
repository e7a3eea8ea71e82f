import torch
import triton
import triton.language as tl

BLOCK = 4096        # values per program per step: 16 per thread at 8 warps (four 16-byte loads)
NUM_WARPS = 8
MAX_PROGRAMS = 1024  # a grid-stride loop: a few programs per SM, each flushing its histogram once
# Bins below PRIVATE are counted in registers with tl.histogram, whose cost per value grows with
# the number of bins; values in higher bins (there are few per bin) go straight to global atomics.
PRIVATE = 256


@triton.jit
def histogram_kernel(x_ptr, out_ptr, n, bins, BINS: tl.constexpr, BLOCK: tl.constexpr,
                     ATOMIC_TAIL: tl.constexpr):
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    b = tl.arange(0, BINS)
    acc = tl.zeros([BINS], tl.int32)  # this program's private histogram, in registers
    for start in range(pid * BLOCK, n, step):
        offs = start + tl.arange(0, BLOCK)  # int32 suffices: the loop stops below n < 2**31
        mask = offs < n
        v = tl.load(x_ptr + offs, mask=mask, other=0)
        if ATOMIC_TAIL:
            # Many bins: only the first BINS are private; the rest are spread thin enough that a
            # relaxed (fence-free) global atomic per value does not contend much.
            acc += tl.histogram(v, BINS, mask=mask & (v < BINS))
            tl.atomic_add(out_ptr + v, tl.full([BLOCK], 1, tl.int32), mask=mask & (v >= BINS), sem="relaxed")
        else:
            acc += tl.histogram(v, BINS, mask=mask)
    # One atomic per bin per program merges the private histograms.
    tl.atomic_add(out_ptr + b, acc, mask=b < bins, sem="relaxed")


def solution(x: torch.Tensor, hist: torch.Tensor) -> torch.Tensor:
    n, bins = x.numel(), hist.numel()
    out = hist.clone()  # the earlier counts; every program adds its share on top
    private = max(32, triton.next_power_of_2(bins))  # tl.histogram works in whole warps of bins
    atomic_tail = private > PRIVATE
    grid = (max(1, min(MAX_PROGRAMS, triton.cdiv(n, BLOCK))),)
    histogram_kernel[grid](x, out, n, bins, BINS=min(private, PRIVATE), BLOCK=BLOCK,
                           ATOMIC_TAIL=atomic_tail, num_warps=NUM_WARPS)
    return out
