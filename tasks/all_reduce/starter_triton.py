# A correct, plain one-shot all-reduce to start from: copy x into this rank's buffer, meet the other
# ranks, sum every rank's buffer, meet again (so that no rank overwrites its buffer while a peer
# still reads it). Faster: push instead of pull, double buffering instead of the second barrier,
# wider blocks, fewer passes over HBM.
import torch
import triton
import triton.language as tl


@triton.jit
def barrier_kernel(signal_ptrs, rank, world, epoch, slot):
    # Program p stores this call's epoch into peer p's pad, then waits for peer p's epoch in its own.
    p = tl.program_id(0)
    peer_pad = tl.load(signal_ptrs + p).to(tl.pointer_type(tl.int32))
    own_pad = tl.load(signal_ptrs + rank).to(tl.pointer_type(tl.int32))
    tl.atomic_xchg(peer_pad + slot * world + rank, epoch, sem="release", scope="sys")
    while tl.atomic_add(own_pad + slot * world + p, 0, sem="acquire", scope="sys") < epoch:
        pass


@triton.jit
def sum_kernel(buffer_ptrs, out_ptr, n, world, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.zeros([BLOCK], tl.float32)
    for p in range(world):
        buf = tl.load(buffer_ptrs + p).to(tl.pointer_type(out_ptr.dtype.element_ty))
        acc += tl.load(buf + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)


calls = 0  # every rank makes the same calls, so this counter is the same on all of them


def solution(x: torch.Tensor, group) -> torch.Tensor:
    global calls
    calls += 1
    n, world = x.numel(), group.world_size
    group.buffer[: x.nbytes].view(x.dtype).copy_(x)
    barrier_kernel[(world,)](group.signal_ptrs, group.rank, world, calls, 0)
    out = torch.empty_like(x)
    BLOCK = 1024
    sum_kernel[(triton.cdiv(n, BLOCK),)](group.buffer_ptrs, out, n, world, BLOCK=BLOCK)
    barrier_kernel[(world,)](group.signal_ptrs, group.rank, world, calls, 1)
    return out
