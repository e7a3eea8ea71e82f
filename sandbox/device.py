"""Which device an evaluation runs on, and what it is."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch

# The CUDA architecture that CPU mode compiles for (nothing runs there): Hopper by default.
DEFAULT_CPU_MODE_ARCH = "90a"


@dataclass(frozen=True)
class Device:
    torch_device: torch.device
    mode: Literal["gpu", "cpu"]
    name: str  # e.g. "NVIDIA H100 80GB HBM3", or "cpu"
    arch: str  # CUDA arch to build for, e.g. "90a"
    l2_bytes: int = 0


def resolve_device(device: str | None = "auto") -> Device:
    """'auto' (a GPU if there is one), 'cpu', 'cuda' or 'cuda:N'."""
    device = device or "auto"
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        arch = os.environ.get("KERNELDOJO_CUDA_ARCH", DEFAULT_CPU_MODE_ARCH)
        return Device(torch.device("cpu"), "cpu", "cpu", arch)
    if not device.startswith("cuda"):
        raise ValueError(f"device {device!r} is not 'auto', 'cpu', 'cuda' or 'cuda:N'")
    if not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asked for, but torch sees no CUDA GPU; use device='cpu'")
    return _cuda_device(torch.device(device).index or 0)


@functools.cache
def _cuda_device(index: int) -> Device:
    props = torch.cuda.get_device_properties(index)
    major, minor = props.major, props.minor
    # sm_90a/sm_100a unlock wgmma/tcgen05; their code runs only on exactly that chip, which is the one here.
    arch = f"{major}{minor}" + ("a" if major >= 9 else "")
    return Device(torch.device("cuda", index), "gpu", props.name, arch, props.L2_cache_size)


def synchronize(device: Device) -> None:
    if device.mode == "gpu":
        torch.cuda.synchronize(device.torch_device)


def cuda_tool(name: str) -> str | None:
    """A CUDA toolkit program (nvcc, cuobjdump): on PATH, else in CUDA_HOME/bin or /usr/local/cuda/bin,
    else beside the nvcc on PATH (a worker's PATH is narrow)."""
    if found := shutil.which(name):
        return found
    homes = [os.environ.get("CUDA_HOME"), "/usr/local/cuda"]
    if nvcc := shutil.which("nvcc"):
        homes.append(str(Path(nvcc).resolve().parent.parent))
    for home in filter(None, homes):
        if (Path(home) / "bin" / name).exists():
            return str(Path(home) / "bin" / name)
    return None


class ExportedMemory:
    """Where a judge allocates what a worker will map by CUDA IPC: memory pools of that judge's own, one per thread.

    An IPC handle maps the caching allocator's whole segment, not the tensor: a worker that was sent the inputs
    read and wrote whatever else of the judge's shared their segment, the reference's expected outputs included
    (red team round 27, `cuMemGetAddressRange` then `cuMemcpyDtoH`). A pool's segments hold only what a worker of
    this judge's thread is sent (inputs and poisoned outputs) or freed copies of it. Per thread, since one judge may
    run several steps at once (an RL framework's threads; red team round 29: their workers shared segments); reused
    by the thread's next steps: a pool per call was never returned to the driver while its blocks were shared, and
    eight judges ran out of an H200's memory.
    """

    def __init__(self, device: Device):
        self.device = device
        self._pools = threading.local()

    def __reduce__(self):  # a copied judge (gymnasium's env checks deep-copy envs) gets pools of its own
        return ExportedMemory, (self.device,)

    @contextlib.contextmanager
    def allocating(self) -> Iterator[None]:
        """This thread's allocations go to its pool while inside."""
        if self.device.mode != "gpu":
            yield
            return
        pool = getattr(self._pools, "pool", None)
        if pool is None:
            pool = self._pools.pool = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(pool, device=self.device.torch_device):
            yield
