"""A distributed task's rank, inside its worker: the peers' memory mapped into this process, the
`PeerGroup` that `solution(*inputs, group)` receives, and the harness's device-side barrier that aligns
the ranks before each timed call. The judge's side (regions, IPC handles, one worker per rank) is
`sandbox.peers`.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

SIGNAL_WORDS = 1024
# Each rank's one allocation: the harness's barrier pad, the submission's signal pad, its buffer.
ALIGN_OFFSET, SIGNAL_OFFSET, BUFFER_OFFSET = 0, 256, 256 + 4 * SIGNAL_WORDS


@dataclass
class PeerGroup:
    """What a distributed task's `solution(*inputs, group)` receives after its inputs."""

    rank: int
    world_size: int
    buffer: Tensor  # uint8: this rank's scratch, which every rank's kernels reach at buffer_ptrs[rank]
    signal: Tensor  # int32: this rank's signal pad, zero at the start
    buffer_ptrs: Tensor  # int64 on this rank's device: every rank's buffer, as kernels here address it
    signal_ptrs: Tensor  # int64 likewise: every rank's signal pad

    @property
    def buffer_bytes(self) -> int:
        return self.buffer.numel()

    @property
    def signal_words(self) -> int:
        return self.signal.numel()


@dataclass
class PeerMemory:
    """What the judge sends rank `rank`: its own region (allocated by the judge on its device), and
    how to reach the others' — CUDA IPC handles on the GPU (opened by the worker in its own GPU's
    context, which is what lets its kernels address them), the shared-memory tensors in CPU mode."""

    rank: int
    own: Tensor
    peers: list  # per rank: (IPC handle bytes, offset) on the GPU, the region itself on the CPU; None for `rank`


def join(rank: int, memory: PeerMemory, device: torch.device) -> tuple[PeerGroup, Callable[[], None] | None]:
    """In rank `rank`'s worker: its PeerGroup, and the harness's barrier for aligning timed calls (GPU only)."""
    bases = []
    for peer, reach in enumerate(memory.peers):
        if peer == rank:
            bases.append(memory.own.data_ptr())
        elif isinstance(reach, Tensor):
            bases.append(reach.data_ptr())
        else:
            bases.append(_open_ipc_handle(device, *reach))

    def addresses(offset: int) -> Tensor:
        return torch.tensor([base + offset for base in bases], dtype=torch.int64, device=device)

    signal = memory.own[SIGNAL_OFFSET:BUFFER_OFFSET].view(torch.int32)
    group = PeerGroup(rank, len(bases), memory.own[BUFFER_OFFSET:], signal, addresses(BUFFER_OFFSET),
                      addresses(SIGNAL_OFFSET))
    align = _Aligner(addresses(ALIGN_OFFSET), rank, len(bases)) if device.type == "cuda" else None
    return group, align


class IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_ubyte * 64)]  # bytes, not c_char: those would stop at the first NUL


def load_libcuda():
    return ctypes.CDLL("libcuda.so.1")


def _open_ipc_handle(device: torch.device, handle: bytes, offset: int) -> int:
    """Map a peer's allocation into this process in `device`'s context, with peer access enabled
    (a mapping made in the owning GPU's context, as torch's unpickling makes it, faults here)."""
    libcuda = load_libcuda()
    torch.cuda.set_device(device)
    torch.empty(1, device=device)  # the device's primary context, current on this thread
    if not all(torch.cuda.can_device_access_peer(device.index, d) for d in range(torch.cuda.device_count())
               if d != device.index):
        raise RuntimeError(f"{device} cannot access the other GPUs' memory (no NVLink or PCIe peer path)")
    pointer = ctypes.c_uint64()
    lazy_enable_peer_access = 1
    opened = libcuda.cuIpcOpenMemHandle_v2(ctypes.byref(pointer), IpcHandle.from_buffer_copy(handle),
                                           lazy_enable_peer_access)
    driver_call(opened, "cuIpcOpenMemHandle")
    return pointer.value + offset


def driver_call(status: int, call: str) -> None:
    if status != 0:
        raise RuntimeError(f"{call} failed with CUDA driver error {status}")


class _Aligner:
    """A device-side barrier across the ranks, run just before each timed call's start event: every
    rank's GPU reaches the call within a link round trip of the others, so no rank's time includes
    waiting for a peer whose host issued its call later."""

    def __init__(self, pad_ptrs: Tensor, rank: int, world: int):
        self.pad_ptrs, self.rank, self.world, self.epoch = pad_ptrs, rank, world, 0

    def __call__(self) -> None:
        self.epoch += 1
        _barrier_kernel()[(self.world,)](self.pad_ptrs, self.rank, self.world, self.epoch)


def compile_barrier(device: torch.device) -> None:
    """Compile the barrier now, on a pad of this rank's own at epoch 0 (which waits for nobody): compiled at the first
    timed call, its ptxas was a process in the worker during the timing requests, where none belongs (red team round
    52). Its integers are not specialised on, so later epochs and ranks need no compile either."""
    pad = torch.zeros(2, dtype=torch.int32, device=device)
    pad_ptrs = torch.tensor([pad.data_ptr()] * 2, dtype=torch.int64, device=device)
    _barrier_kernel()[(2,)](pad_ptrs, 0, 2, 0)
    torch.cuda.synchronize(device)


@functools.cache
def _barrier_kernel():
    import triton
    import triton.language as tl

    @triton.jit(do_not_specialize=["rank", "world", "epoch"])
    def kerneldojo_align_ranks(pad_ptrs, rank, world, epoch):  # by this name the profile leaves it out
        # Program p tells peer p this rank has arrived, then waits until peer p has told this rank.
        p = tl.program_id(0)
        peer_pad = tl.load(pad_ptrs + p).to(tl.pointer_type(tl.int32))
        own_pad = tl.load(pad_ptrs + rank).to(tl.pointer_type(tl.int32))
        tl.atomic_xchg(peer_pad + rank, epoch, sem="release", scope="sys")
        while tl.atomic_add(own_pad + p, 0, sem="acquire", scope="sys") < epoch:
            pass

    return kerneldojo_align_ranks
