# Baseline: one-shot all-reduce for two ranks, by push. Each rank writes its x straight into the
# peer's buffer over NVLink (remote writes are posted, so the link streams without round trips),
# meets the peer at a barrier, then sums its own x with what arrived: n elements cross the link
# each way, x is read twice from local HBM and out written once, with no staging copy.
# The buffer's two halves alternate between calls: a rank may push call k+1's data while its
# peer still reads call k's half, and the barrier of call k+1 (which the peer enters only after
# its call-k sum) guards the half that call k+2 reuses; one barrier per call is enough.
import torch
import triton
import triton.language as tl


@triton.jit
def push_kernel(x_ptr, buffer_ptrs, peer, n, half_offset, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    dst = tl.load(buffer_ptrs + peer).to(tl.pointer_type(x_ptr.dtype.element_ty)) + half_offset
    tl.store(dst + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def barrier_kernel(signal_ptrs, rank, world, epoch):
    # Program p stores this call's epoch into peer p's pad (release: the push kernel, finished
    # before this one started, is visible first), then waits for peer p's epoch in its own pad.
    p = tl.program_id(0)
    peer_pad = tl.load(signal_ptrs + p).to(tl.pointer_type(tl.int32))
    own_pad = tl.load(signal_ptrs + rank).to(tl.pointer_type(tl.int32))
    tl.atomic_xchg(peer_pad + rank, epoch, sem="release", scope="sys")
    while tl.atomic_add(own_pad + p, 0, sem="acquire", scope="sys") < epoch:
        pass


@triton.jit
def sum_kernel(x_ptr, buffer_ptrs, rank, out_ptr, n, half_offset, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    received = tl.load(buffer_ptrs + rank).to(tl.pointer_type(x_ptr.dtype.element_ty)) + half_offset
    acc = tl.load(x_ptr + offs, mask=mask).to(tl.float32) + tl.load(received + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)


calls = 0  # the same on every rank: each makes the same sequence of calls


def solution(x: torch.Tensor, group) -> torch.Tensor:
    global calls
    if group.world_size != 2:
        raise NotImplementedError("this baseline pushes to one peer: two ranks only")
    if 2 * x.nbytes > group.buffer_bytes:
        raise ValueError(f"x ({x.nbytes} bytes) needs two halves of the peer buffer ({group.buffer_bytes} bytes)")
    calls += 1
    n, half_offset = x.numel(), (calls % 2) * x.numel()
    out = torch.empty_like(x)
    BLOCK = 4096  # 8 KB of bf16 per program: enough requests in flight to cover the link's latency
    grid = (triton.cdiv(n, BLOCK),)
    push_kernel[grid](x, group.buffer_ptrs, 1 - group.rank, n, half_offset, BLOCK=BLOCK, num_warps=8)
    barrier_kernel[(2,)](group.signal_ptrs, group.rank, 2, calls)
    sum_kernel[grid](x, group.buffer_ptrs, group.rank, out, n, half_offset, BLOCK=BLOCK, num_warps=8)
    return out
