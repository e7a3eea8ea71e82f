import torch
import triton
import triton.language as tl

PAIRS = 4096  # rotated pairs (8192 elements) per program


@triton.jit
def rope_kernel(x_ptr, cos_ptr, sin_ptr, out_ptr, rows, heads, head_dim, half,
                BLOCK_R: tl.constexpr, BLOCK_H: tl.constexpr):
    # x viewed as (rows = tokens * heads, head_dim). A program rotates BLOCK_R consecutive rows:
    # a (BLOCK_R, BLOCK_H) tile of first-half elements and the matching tile of second-half ones.
    # head_dim and half arrive as plain ints, so Triton sees when they are multiples of 16 and
    # emits 16-byte loads and stores along each half-row.
    # Row numbers fit in 32 bits (tokens * heads < 2**31), which keeps r // heads a 32-bit divide;
    # element offsets are 64-bit, since tokens * heads * head_dim may not fit.
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    i = tl.arange(0, BLOCK_H)
    mask = (r < rows)[:, None] & (i < half)[None, :]
    x_off = r.to(tl.int64)[:, None] * head_dim + i[None, :]
    # The cos/sin row of a token serves all of its heads: consecutive rows of one token gather the
    # same table row, which after the first fetch comes from L1/L2, so DRAM sees each table once.
    t_off = (r // heads).to(tl.int64)[:, None] * half + i[None, :]
    c = tl.load(cos_ptr + t_off, mask=mask)
    s = tl.load(sin_ptr + t_off, mask=mask)
    x1 = tl.load(x_ptr + x_off, mask=mask, eviction_policy="evict_first").to(tl.float32)
    x2 = tl.load(x_ptr + x_off + half, mask=mask, eviction_policy="evict_first").to(tl.float32)
    o1 = x1 * c - x2 * s
    o2 = x2 * c + x1 * s
    tl.store(out_ptr + x_off, o1.to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(out_ptr + x_off + half, o2.to(out_ptr.dtype.element_ty), mask=mask)


def solution(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    tokens, heads, head_dim = x.shape
    out = torch.empty_like(x)
    half = head_dim // 2
    rows = tokens * heads
    if rows == 0 or half == 0:
        return out
    block_h = triton.next_power_of_2(half)
    block_r = max(1, PAIRS // block_h)
    # 8 warps: 16 pairs per thread, i.e. two (bf16) or four (fp32) 16-byte vectors per half.
    grid = (triton.cdiv(rows, block_r),)
    rope_kernel[grid](x, cos, sin, out, rows, heads, head_dim, half, BLOCK_R=block_r, BLOCK_H=block_h, num_warps=8)
    return out
