import torch
import triton
import triton.language as tl

# Memory-bound: tiles of 4096 outputs over 8 warps (16 per thread; with gate and up, several
# 16-byte loads in flight per thread), cut as BLOCK_R rows x BLOCK_C columns of the output.
TILE = 4096
MAX_BLOCK_C = 1024
NUM_WARPS = 8


@triton.jit
def swiglu_kernel(x_ptr, out_ptr, rows, hidden, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # One flat grid (a 2-D one would cap the row blocks at 65535); column blocks vary fastest so
    # neighbouring programs stream through neighbouring memory.
    pid = tl.program_id(0)
    col_blocks = tl.cdiv(hidden, BLOCK_C)
    r = (pid // col_blocks) * BLOCK_R + tl.arange(0, BLOCK_R)
    c = (pid % col_blocks) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (r[:, None] < rows) & (c[None, :] < hidden)
    # gate and up are the two halves of each row of x. When hidden is a multiple of 16 (Triton
    # specializes on that), both halves start 16-element aligned, and every access is a
    # 16-byte vector.
    gate_offs = r[:, None].to(tl.int64) * (2 * hidden) + c[None, :]
    gate = tl.load(x_ptr + gate_offs, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + gate_offs + hidden, mask=mask, other=0.0).to(tl.float32)
    # silu(g) * u = g * u / (1 + exp(-g)). exp's argument is capped at 80 so it stays finite; there
    # the product is g * u * 1e-35, the reference's zero.
    y = gate * up / (1.0 + tl.exp(tl.minimum(-gate, 80.0)))
    out_offs = r[:, None].to(tl.int64) * hidden + c[None, :]
    tl.store(out_ptr + out_offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def solution(x: torch.Tensor) -> torch.Tensor:
    rows, hidden = x.shape[0], x.shape[1] // 2
    out = torch.empty((rows, hidden), device=x.device, dtype=x.dtype)
    if rows == 0 or hidden == 0:
        return out
    block_c = min(triton.next_power_of_2(hidden), MAX_BLOCK_C)
    block_r = TILE // block_c
    grid = (triton.cdiv(rows, block_r) * triton.cdiv(hidden, block_c),)
    swiglu_kernel[grid](x, out, rows, hidden, BLOCK_R=block_r, BLOCK_C=block_c, num_warps=NUM_WARPS)
    return out
