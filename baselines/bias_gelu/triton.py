import torch
import triton
import triton.language as tl

# Memory-bound: tiles of 4096 elements over 8 warps (16 per thread, several 16-byte accesses in
# flight), cut as BLOCK_R rows x BLOCK_C columns so that each program loads its slice of the bias
# once and broadcasts it over BLOCK_R rows instead of re-reading it per element.
TILE = 4096
MAX_BLOCK_C = 512
NUM_WARPS = 8


@triton.jit
def _gelu(h):
    # 0.5 * (1 + tanh(u)) == 1 / (1 + exp(-2u)): one exp, one divide, no cancellation for h < 0.
    # exp's argument is capped at 80 so it stays finite; there the result is h * 1e-35, i.e. the
    # reference's zero.
    u2 = 1.5957691216057308 * (h + 0.044715 * h * h * h)  # 2 * sqrt(2/pi) * (h + 0.044715 h^3)
    return h / (1.0 + tl.exp(tl.minimum(-u2, 80.0)))


@triton.jit
def bias_gelu_kernel(x_ptr, bias_ptr, out_ptr, rows, cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # One flat grid (a 2-D one would cap the row blocks at 65535): column blocks vary fastest, so
    # neighbouring programs cover one band of rows and the band streams through DRAM in order.
    pid = tl.program_id(0)
    col_blocks = tl.cdiv(cols, BLOCK_C)
    r = (pid // col_blocks) * BLOCK_R + tl.arange(0, BLOCK_R)
    c = (pid % col_blocks) * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = c < cols
    mask = (r[:, None] < rows) & cmask[None, :]
    # When cols is a multiple of 16 Triton knows each row starts 16-element aligned and the
    # column mask is constant over 16-element groups, so the accesses stay 16-byte vectors.
    offs = r[:, None].to(tl.int64) * cols + c[None, :]
    b = tl.load(bias_ptr + c, mask=cmask, other=0.0).to(tl.float32)
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = _gelu(x + b[None, :])  # float32 throughout, one rounding at the store
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def solution(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape
    out = torch.empty_like(x)
    if rows == 0 or cols == 0:
        return out
    block_c = min(triton.next_power_of_2(cols), MAX_BLOCK_C)
    block_r = TILE // block_c
    grid = (triton.cdiv(rows, block_r) * triton.cdiv(cols, block_c),)
    bias_gelu_kernel[grid](x, bias, out, rows, cols, BLOCK_R=block_r, BLOCK_C=block_c, num_warps=NUM_WARPS)
    return out
