import torch
import triton
import triton.language as tl

# 64 x 64 tiles: every row segment of x and out and every column segment of y is 256 bytes, eight
# whole 32-byte sectors, and 16 elements per thread per operand keeps plenty of loads in flight.
BLOCK_R = 64
BLOCK_C = 64
NUM_WARPS = 8


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, rows, cols, xs0, xs1, ys0, ys1,
               BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    pid = tl.program_id(0)
    tiles_c = tl.cdiv(cols, BLOCK_C)
    r = (pid // tiles_c) * BLOCK_R + tl.arange(0, BLOCK_R)
    c = (pid % tiles_c) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (r[:, None] < rows) & (c[None, :] < cols)
    r64 = r.to(tl.int64)[:, None]  # int64 offsets: a large view's strides times indices can pass 2**31
    c64 = c.to(tl.int64)[None, :]
    # Triton specialises integer arguments equal to 1, so it knows x is contiguous along columns
    # (xs1 == 1) and y along rows (ys0 == 1). It gives each load a layout whose threads run along
    # that contiguous axis, so both loads are coalesced, and moves y's tile into x's layout through
    # shared memory before the add: the tiled transpose, written for us.
    x = tl.load(x_ptr + r64 * xs0 + c64 * xs1, mask=mask)
    y = tl.load(y_ptr + r64 * ys0 + c64 * ys1, mask=mask)
    tl.store(out_ptr + r64 * cols + c64, x + y, mask=mask)


def solution(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape
    out = torch.empty((rows, cols), device=x.device, dtype=x.dtype)
    grid = (triton.cdiv(rows, BLOCK_R) * triton.cdiv(cols, BLOCK_C),)
    add_kernel[grid](x, y, out, rows, cols, x.stride(0), x.stride(1), y.stride(0), y.stride(1),
                     BLOCK_R=BLOCK_R, BLOCK_C=BLOCK_C, num_warps=NUM_WARPS)
    return out
