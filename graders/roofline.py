"""The physical floor of a task's time: its FLOPs over peak math, its bytes over peak bandwidth.

Peaks are the vendors' datasheet figures (dense, no sparsity), so the fraction is a lower bound
on how close a kernel is to the hardware; docs/results.md cites them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Peaks:
    dram_bytes_per_s: float
    flops_per_s: dict[str, float]  # by dtype; float32 is the CUDA-core rate (no TF32)


# NVIDIA H100 SXM5 and H200 SXM datasheets: 3.35 / 4.8 TB/s HBM3(e), 989 TFLOP/s dense bf16/fp16,
# 1979 dense fp8/int8, 67 fp32. The PCIe H100 is slower: 2.0 TB/s, 756 bf16, 51 fp32.
_H100_MATH = {"bfloat16": 989e12, "float16": 989e12, "int8": 1979e12, "float32": 67e12, "int32": 67e12 / 2}
_PEAKS = {
    "H200": Peaks(4.8e12, _H100_MATH),
    "H100 PCIe": Peaks(2.0e12, {k: v * 756 / 989 for k, v in _H100_MATH.items()}),
    "H100": Peaks(3.35e12, _H100_MATH),
}


def peaks_for(device_name: str) -> Peaks | None:
    for key, peaks in _PEAKS.items():  # most specific names first
        if key in device_name:
            return peaks
    return None


def floor_ms(flops: int, bytes_moved: int, dtype: str, peaks: Peaks | None) -> float | None:
    if peaks is None or dtype not in peaks.flops_per_s:
        return None
    return 1e3 * max(flops / peaks.flops_per_s[dtype], bytes_moved / peaks.dram_bytes_per_s)
