import torch
import triton
import triton.language as tl

# Each program scans ROWS rows, CHUNK columns at a time (ROWS * CHUNK = TILE elements per step),
# carrying each row's running total from one chunk to the next. One read, one write: the DRAM floor.
TILE = 4096
NUM_WARPS = 8  # 16 floats (four 16-byte vectors) per thread per step


@triton.jit
def prefix_sum_kernel(x_ptr, out_ptr, rows, cols, ROWS: tl.constexpr, CHUNK: tl.constexpr):
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    c = tl.arange(0, CHUNK)
    row_ok = r[:, None] < rows
    base = r.to(tl.int64)[:, None] * cols
    carry = tl.zeros([ROWS], tl.float32)
    for start in range(0, cols, CHUNK):
        mask = row_ok & (start + c[None, :] < cols)
        x = tl.load(x_ptr + base + start + c[None, :], mask=mask, other=0.0)  # padding adds 0
        # A tree scan of the chunk in registers and warp shuffles, shifted by the total so far.
        scan = tl.cumsum(x, axis=1) + carry[:, None]
        tl.store(out_ptr + base + start + c[None, :], scan, mask=mask)
        # The next carry is the scan's last column (padding adds 0, so it is the row's total so far).
        # Not `carry += tl.sum(x)`: Triton 3.6's thread-locality pass asserts on that loop shape.
        carry = tl.sum(tl.where(c[None, :] == CHUNK - 1, scan, 0.0), axis=1)


def solution(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape
    out = torch.empty_like(x)
    if rows == 0 or cols == 0:
        return out
    chunk = min(TILE, max(16, triton.next_power_of_2(cols)))  # scans at least 16 wide; padding adds 0
    rows_per_prog = TILE // chunk  # short rows: several per program, so each step is a full tile
    num_warps = min(NUM_WARPS, max(1, rows_per_prog * chunk // 512))
    grid = (triton.cdiv(rows, rows_per_prog),)
    prefix_sum_kernel[grid](x, out, rows, cols, ROWS=rows_per_prog, CHUNK=chunk, num_warps=num_warps)
    return out
