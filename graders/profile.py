"""Profiled timing: the CUPTI kernel records (through torch.profiler) of a window of calls.

Events see only the stream they are recorded on; the profile sees every kernel on every stream.
From it come the GPU time per call summed over all kernels, the time the GPU was busy (the union
of kernel intervals, so overlapping streams are not counted twice), launches per call, and the
share of GPU time spent in kernels the submission compiled itself, as opposed to torch's or a
vendor library's. The judge scores the larger of the event median and the busy time per call.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from kerneldojo.result import KernelRecord, ProfileStats

# Kernels of NVIDIA's math libraries (cuBLAS/cuBLASLt on Hopper names many GEMMs nvjet_*; CUTLASS
# inside cuBLAS, cuDNN, and the flash/memory-efficient attention kernels shipped in torch).
VENDOR_KERNEL = re.compile(r"nvjet|xmma|cublas|cudnn|gemv|gemmk|gemm_|_gemm|cutlass|flash_fwd|fmha|sm\d+_", re.I)


@dataclass
class KernelInterval:
    name: str
    stream: int
    start_ns: int
    end_ns: int


# The harness's kernel that aligns a collective's ranks ahead of the window: left out of every figure.
# Only its one launch is: a submission's kernel of the same name still counts.
ALIGN_KERNEL = "kerneldojo_align_ranks"


def profile_calls(calls: Sequence[Callable[[], object]], device: torch.device,
                  before: Callable[[], None] | None = None) -> list[KernelInterval]:
    """Run each call once under the profiler, the device synchronized around the window; `before`
    queues harness work ahead of the calls (a collective's ranks aligned on the GPU)."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        if before is not None:
            before()
        for call in calls:
            call()
        torch.cuda.synchronize(device)
    kernels = []
    for e in prof.profiler.kineto_results.events():
        if e.device_type() != torch.autograd.DeviceType.CUDA or not _is_kernel(e):
            continue
        kernels.append(KernelInterval(e.name(), e.device_resource_id(), e.start_ns(), e.end_ns()))
    return without_align_launch(kernels) if before is not None else kernels


def without_align_launch(kernels: list[KernelInterval]) -> list[KernelInterval]:
    """The window's kernels less the harness's one align launch, which ran first."""
    aligns = [k for k in kernels if kernel_base_name(k.name) == ALIGN_KERNEL]
    first = min(aligns, key=lambda k: k.start_ns) if aligns else None
    return [k for k in kernels if k is not first]


def _is_kernel(event) -> bool:
    # CUPTI's device-side records are kernels, copies and memsets; the last two are named so.
    return not event.name().startswith(("Memcpy", "Memset"))


def kernel_base_name(name: str) -> str:
    """'void ns::add_kernel<float>(float const*, ...)' -> 'add_kernel'."""
    name = re.sub(r"^(void|static|__global__)\s+", "", name.strip())
    head = re.split(r"[<(]", name, maxsplit=1)[0]
    return head.rsplit("::", 1)[-1].strip()


def summarize_profile(kernels: list[KernelInterval], calls: int, own_names: set[str]) -> ProfileStats:
    total: dict[tuple[str, bool], list[float]] = {}
    for k in kernels:
        own = kernel_base_name(k.name) in own_names
        total.setdefault((k.name, own), []).append((k.end_ns - k.start_ns) / 1e6)
    kernel_ms = sum(sum(v) for v in total.values())
    own_ms = sum(sum(v) for (_, own), v in total.items() if own)
    records = sorted(
        (KernelRecord(name=name[:200], own=own, launches=len(v), ms_per_call=sum(v) / calls,
                      vendor=not own and bool(VENDOR_KERNEL.search(name)))
         for (name, own), v in total.items()),
        key=lambda r: -r.ms_per_call,
    )  # fmt: skip
    streams = {k.stream for k in kernels}
    return ProfileStats(
        calls=calls, kernel_ms=kernel_ms / calls, busy_ms=_union_ms(kernels) / calls,
        launches_per_call=len(kernels) / calls, streams=len(streams),
        own_share=own_ms / kernel_ms if kernel_ms > 0 else None, kernels=records[:12],
    )  # fmt: skip


def _union_ms(kernels: list[KernelInterval]) -> float:
    busy, end = 0, None
    for k in sorted(kernels, key=lambda k: k.start_ns):
        if end is None or k.start_ns > end:
            busy += k.end_ns - k.start_ns
            end = k.end_ns
        elif k.end_ns > end:
            busy += k.end_ns - end
            end = k.end_ns
    return busy / 1e6


def triton_kernel_names(module_name: str) -> set[str]:
    """The Triton kernels defined by a submission module, at top level or inside its functions."""
    import gc

    names = set()
    for obj in gc.get_objects():
        if type(obj).__name__ in ("JITFunction", "InterpretedFunction"):
            fn = getattr(obj, "fn", None)
            if getattr(fn, "__module__", None) == module_name:
                names.add(fn.__name__)
    return names


@functools.cache  # a library's path names its content (the build cache is keyed by source and flags)
def native_kernel_names(library) -> frozenset[str]:
    """The __global__ functions compiled into a built library, from its embedded cubins."""
    import shutil
    import subprocess

    tool = shutil.which("cuobjdump")
    if tool is None:
        return frozenset()
    out = subprocess.run([tool, "-symbols", str(library)], capture_output=True, text=True, timeout=60).stdout
    return frozenset(_demangled_base(line.split()[-1]) for line in out.splitlines()
                     if "STT_FUNC" in line and "STO_ENTRY" in line)


def _demangled_base(mangled: str) -> str:
    """The function's own identifier from an Itanium-mangled name, enough to match the profile."""
    if not mangled.startswith("_Z"):
        return mangled
    rest = mangled[2:]
    if rest.startswith("N"):  # nested: N <len><id> <len><id> ... E
        rest, last = rest[1:], mangled
        while rest and rest[0].isdigit():
            n = int(re.match(r"\d+", rest).group())
            digits = len(str(n))
            last, rest = rest[digits:digits + n], rest[digits + n:]
            if rest.startswith(("I", "E")):
                break
        return last
    m = re.match(r"(\d+)", rest)
    return rest[len(m.group()):len(m.group()) + int(m.group())] if m else mangled
