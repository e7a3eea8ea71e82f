"""The physical floor of a task's time: its FLOPs over peak math, its bytes over peak bandwidth.

On a GPU the peaks are measured once per process (a large device-to-device copy, counting bytes
read and written; large cuBLAS products in bf16, fp32 without TF32, and int8), so the roofline
fraction says how close a kernel comes to what this card really does. The vendors' datasheet
figures remain as a fallback and for CPU-side checks such as the linter.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Peaks:
    dram_bytes_per_s: float
    flops_per_s: dict[str, float]  # by dtype; float32 is the CUDA-core rate (no TF32)
    source: str = "datasheet"


# NVIDIA H100 SXM5 and H200 SXM datasheets: 3.35 / 4.8 TB/s HBM3(e), 989 TFLOP/s dense bf16/fp16,
# 1979 dense fp8/int8, 67 fp32. The PCIe H100 is slower: 2.0 TB/s, 756 bf16, 51 fp32.
_H100_MATH = {"bfloat16": 989e12, "float16": 989e12, "int8": 1979e12, "float8_e4m3fn": 1979e12, "float32": 67e12,
              "int32": 67e12 / 2}
_DATASHEET = {
    "H200": Peaks(4.8e12, _H100_MATH),
    "H100 PCIe": Peaks(2.0e12, {k: v * 756 / 989 for k, v in _H100_MATH.items()}),
    "H100": Peaks(3.35e12, _H100_MATH),
}


def datasheet_peaks(device_name: str) -> Peaks | None:
    for key, peaks in _DATASHEET.items():  # most specific names first
        if key in device_name:
            return peaks
    return None


@functools.cache
def measured_peaks(device: torch.device) -> Peaks:
    from .timing import time_calls

    l2 = torch.cuda.get_device_properties(device).L2_cache_size
    src = torch.empty(1 << 30, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    copy = time_calls([functools.partial(dst.copy_, src)], device, l2, budget_s=0.5)
    del src, dst
    flops = {}
    n = 8192
    for dtype in (torch.bfloat16, torch.float32, torch.int8):
        g = torch.Generator(device=device).manual_seed(0)
        if dtype is torch.int8:
            a = torch.randint(-127, 128, (n, n), generator=g, device=device, dtype=dtype)
            b = torch.randint(-127, 128, (n, n), generator=g, device=device, dtype=dtype)
            # cuBLAS's fast int8 path wants b column-major (k-contiguous); row-major b is ~8x slower.
            fn = functools.partial(torch._int_mm, a, b.t().contiguous().t())
        else:
            a = torch.randn(n, n, generator=g, device=device, dtype=dtype)
            b = torch.randn(n, n, generator=g, device=device, dtype=dtype)
            fn = functools.partial(torch.mm, a, b)
        tf32 = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        try:
            stats = time_calls([fn], device, l2, budget_s=0.5)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = tf32
        flops[str(dtype).removeprefix("torch.")] = 2 * n**3 / (stats.median_ms * 1e-3)
    flops["float16"] = flops["bfloat16"]
    flops["float8_e4m3fn"] = _scaled_mm_rate(device, l2, n)
    flops["int32"] = flops["float32"] / 2
    return Peaks(2 * (1 << 30) / (copy.median_ms * 1e-3), flops, source="measured")


def _scaled_mm_rate(device: torch.device, l2: int, n: int) -> float:
    """cuBLAS's fp8 (e4m3) product with per-tensor scales: b column-major, as it requires."""
    from .timing import time_calls

    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, generator=g, device=device).to(torch.float8_e4m3fn)
    b = torch.randn(n, n, generator=g, device=device).to(torch.float8_e4m3fn).t()
    one = torch.ones((), device=device)
    fn = functools.partial(torch._scaled_mm, a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    return 2 * n**3 / (time_calls([fn], device, l2, budget_s=0.5).median_ms * 1e-3)


def floor_ms(flops: int, bytes_moved: int, dtype: str, peaks: Peaks | None) -> float | None:
    if peaks is None or dtype not in peaks.flops_per_s:
        return None
    return 1e3 * max(flops / peaks.flops_per_s[dtype], bytes_moved / peaks.dram_bytes_per_s)
