import torch
import triton
import triton.language as tl

EPS = 1e-5
# Rows up to this many columns are held whole in registers (32 floats of h, weight and bias per
# thread at 16 warps): x and residual are read once, h and y written once. Longer rows stream
# through in CHUNK-sized pieces.
MAX_FUSED = 16384
CHUNK = 4096
TILE_BYTES = 16384  # short rows are packed several to a program, about this much x per program


@triton.jit
def _round_to(v, dtype: tl.constexpr):
    # float32 -> dtype, rounding to nearest even as PyTorch does. On the GPU v.to(tl.bfloat16) does
    # exactly this, but Triton's CPU interpreter truncates, and that would shift h by an ulp and y
    # (computed from h) by far more; so for bfloat16 round by hand on the bits (inputs are finite).
    if dtype == tl.bfloat16:
        bits = v.to(tl.uint32, bitcast=True)
        bits += 0x7FFF + ((bits >> 16) & 1)
        return (bits >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)
    else:
        return v.to(dtype)


@triton.jit
def add_layernorm_fused(x_ptr, res_ptr, w_ptr, b_ptr, h_ptr, y_ptr, rows, cols, eps,
                        ROWS: tl.constexpr, BLOCK: tl.constexpr):
    # ROWS rows per program. ROWS > 1 only for short rows: the program still has enough bytes in
    # flight, and loads weight and bias once for all its rows.
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    c = tl.arange(0, BLOCK)
    cmask = c < cols
    mask = (r[:, None] < rows) & cmask[None, :]
    # With cols a multiple of 16 (Triton specializes on that), rows start 16-element aligned and
    # the masks are constant over 16 columns, so loads and stores are 16-byte vectors.
    offs = r[:, None].to(tl.int64) * cols + c[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    res = tl.load(res_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    h = _round_to(x + res, h_ptr.dtype.element_ty)  # rounded as stored: the norm sees h as returned
    tl.store(h_ptr + offs, h, mask=mask)
    h = h.to(tl.float32)
    # Two-pass statistics on registers: exact even when |mean| >> std.
    mean = tl.sum(h, axis=1) / cols
    d = tl.where(cmask[None, :], h - mean[:, None], 0.0)  # padding lanes out of the variance
    rstd = tl.rsqrt(tl.sum(d * d, axis=1) / cols + eps)
    w = tl.load(w_ptr + c, mask=cmask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + c, mask=cmask, other=0.0).to(tl.float32)
    y = d * rstd[:, None] * w[None, :] + b[None, :]
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def add_layernorm_long(x_ptr, res_ptr, w_ptr, b_ptr, h_ptr, y_ptr, cols, eps, CHUNK: tl.constexpr):
    # One program per long row. Pass 1 writes h chunk by chunk, takes each chunk's exact mean and
    # sum of squared deviations, and merges them into running totals (Chan et al.'s parallel
    # variance). Pass 2 reads h back (one read instead of x and residual; mostly from L2) and
    # writes y.
    row = tl.program_id(0).to(tl.int64) * cols
    n = tl.zeros([], dtype=tl.float32)
    mean = tl.zeros([], dtype=tl.float32)
    m2 = tl.zeros([], dtype=tl.float32)
    for start in range(0, cols, CHUNK):
        c = start + tl.arange(0, CHUNK)
        mask = c < cols
        x = tl.load(x_ptr + row + c, mask=mask, other=0.0).to(tl.float32)
        res = tl.load(res_ptr + row + c, mask=mask, other=0.0).to(tl.float32)
        h = _round_to(x + res, h_ptr.dtype.element_ty)
        tl.store(h_ptr + row + c, h, mask=mask)
        h = h.to(tl.float32)
        cnt = tl.minimum(cols - start, CHUNK).to(tl.float32)
        chunk_mean = tl.sum(h, axis=0) / cnt
        d = tl.where(mask, h - chunk_mean, 0.0)
        total = n + cnt
        delta = chunk_mean - mean
        mean += delta * (cnt / total)
        m2 += tl.sum(d * d, axis=0) + delta * delta * (n * cnt / total)
        n = total
    rstd = tl.rsqrt(m2 / cols + eps)
    # Pass 2 reads h written by other threads of this program: a block-wide barrier makes those
    # global stores visible first.
    tl.debug_barrier()
    for start in range(0, cols, CHUNK):
        c = start + tl.arange(0, CHUNK)
        mask = c < cols
        h = tl.load(h_ptr + row + c, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + c, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + c, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row + c, ((h - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


def solution(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor):
    rows, cols = x.shape
    h = torch.empty_like(x)
    y = torch.empty_like(x)
    if rows == 0 or cols == 0:
        return h, y
    block = triton.next_power_of_2(cols)
    if block <= MAX_FUSED:
        tile = TILE_BYTES // x.element_size()  # 4096 floats or 8192 bfloat16s
        rows_per_prog = min(max(1, tile // block), triton.next_power_of_2(rows))
        num_warps = min(16, max(1, rows_per_prog * block // 512))  # 16 elements a thread, up to 32
        grid = (triton.cdiv(rows, rows_per_prog),)
        add_layernorm_fused[grid](x, residual, weight, bias, h, y, rows, cols, EPS, ROWS=rows_per_prog,
                                  BLOCK=block, num_warps=num_warps)
    else:
        add_layernorm_long[(rows,)](x, residual, weight, bias, h, y, cols, EPS, CHUNK=CHUNK, num_warps=16)
    return h, y
