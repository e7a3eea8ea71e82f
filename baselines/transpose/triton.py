import torch
import triton
import triton.language as tl

# 64 x 64 float32 tiles: every row segment read from x and every row segment written to out is
# 256 bytes (eight whole 32-byte sectors); 8 warps give 16 elements per thread, four 16-byte
# vectors in flight each way when the sizes allow 16-byte accesses.
BLOCK_R = 64
BLOCK_C = 64
NUM_WARPS = 8


@triton.jit
def transpose_kernel(x_ptr, out_ptr, rows, cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    pid = tl.program_id(0)
    tiles_c = tl.cdiv(cols, BLOCK_C)
    r = (pid // tiles_c) * BLOCK_R + tl.arange(0, BLOCK_R)
    c = (pid % tiles_c) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (r[:, None] < rows) & (c[None, :] < cols)
    r64 = r.to(tl.int64)[:, None]
    c64 = c.to(tl.int64)[None, :]
    # The load is contiguous along c and the store along r. Triton gives each access its own
    # coalesced layout (threads along the contiguous axis) and converts the tile from one layout
    # to the other through shared memory, swizzled against bank conflicts: the tiled transpose.
    tile = tl.load(x_ptr + r64 * cols + c64, mask=mask)
    tl.store(out_ptr + c64 * rows + r64, tile, mask=mask)


def solution(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape
    out = torch.empty((cols, rows), device=x.device, dtype=x.dtype)
    grid = (triton.cdiv(rows, BLOCK_R) * triton.cdiv(cols, BLOCK_C),)
    transpose_kernel[grid](x, out, rows, cols, BLOCK_R=BLOCK_R, BLOCK_C=BLOCK_C, num_warps=NUM_WARPS)
    return out
