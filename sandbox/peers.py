"""Distributed tasks: one worker per rank, memory that every rank reaches, and the judge's view of
the ranks as one solution.

The judge allocates one region per rank on that rank's GPU (shared memory in CPU mode): the
harness's barrier pad, the submission's signal pad and its scratch buffer. Each worker receives
its own region as it receives inputs, and the CUDA IPC handles of the others, which it opens in
its own GPU's context with peer access, so that its kernels can read and write them over NVLink.
There is no process group, no NCCL and no network between the workers; what a submission
exchanges goes through these regions. `CollectiveSolution` then looks like any `Solution` to the
judge: inputs and outputs stacked over ranks on dim 0, rank r computing row r.
"""

from __future__ import annotations

import concurrent.futures as cf
import ctypes
import functools
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from kerneldojo.graders.checks import Flagged, message
from kerneldojo.result import TimeStats

from .runner import COLLECTIVE_RUNS

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


class PeerRegions:
    """The judge's side: one region per rank on that rank's device, owned by the judge for the step."""

    def __init__(self, devices: list[torch.device], buffer_bytes: int):
        self.regions = []
        for device in devices:
            region = torch.zeros(BUFFER_OFFSET + buffer_bytes, dtype=torch.uint8, device=device)
            self.regions.append(region.share_memory_() if device.type == "cpu" else region)
        self.reachable = [r if r.device.type == "cpu" else _ipc_handle(r) for r in self.regions]

    def for_rank(self, rank: int) -> PeerMemory:
        return PeerMemory(rank, self.regions[rank], [None if p == rank else h for p, h in enumerate(self.reachable)])


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


class _IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_ubyte * 64)]  # bytes, not c_char: those would stop at the first NUL


def _libcuda():
    return ctypes.CDLL("libcuda.so.1")


def _ipc_handle(region: Tensor) -> tuple[bytes, int]:
    """The CUDA IPC handle of the allocation holding `region`, and where in it `region` starts."""
    libcuda = _libcuda()
    with torch.cuda.device(region.device):
        base, size, handle = ctypes.c_uint64(), ctypes.c_size_t(), _IpcHandle()
        _driver(libcuda.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size),
                                                ctypes.c_uint64(region.data_ptr())), "cuMemGetAddressRange")
        _driver(libcuda.cuIpcGetMemHandle(ctypes.byref(handle), base), "cuIpcGetMemHandle")
    return bytes(handle.reserved), region.data_ptr() - base.value


def _open_ipc_handle(device: torch.device, handle: bytes, offset: int) -> int:
    """Map a peer's allocation into this process in `device`'s context, with peer access enabled
    (a mapping made in the owning GPU's context, as torch's unpickling makes it, faults here)."""
    libcuda = _libcuda()
    torch.cuda.set_device(device)
    torch.empty(1, device=device)  # the device's primary context, current on this thread
    if not all(torch.cuda.can_device_access_peer(device.index, d) for d in range(torch.cuda.device_count())
               if d != device.index):
        raise RuntimeError(f"{device} cannot access the other GPUs' memory (no NVLink or PCIe peer path)")
    pointer = ctypes.c_uint64()
    lazy_enable_peer_access = 1
    opened = libcuda.cuIpcOpenMemHandle_v2(ctypes.byref(pointer), _IpcHandle.from_buffer_copy(handle),
                                           lazy_enable_peer_access)
    _driver(opened, "cuIpcOpenMemHandle")
    return pointer.value + offset


def _driver(status: int, call: str) -> None:
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


@functools.cache
def _barrier_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def kerneldojo_align_ranks(pad_ptrs, rank, world, epoch):  # by this name the profile leaves it out
        # Program p tells peer p this rank has arrived, then waits until peer p has told this rank.
        p = tl.program_id(0)
        peer_pad = tl.load(pad_ptrs + p).to(tl.pointer_type(tl.int32))
        own_pad = tl.load(pad_ptrs + rank).to(tl.pointer_type(tl.int32))
        tl.atomic_xchg(peer_pad + rank, epoch, sem="release", scope="sys")
        while tl.atomic_add(own_pad + p, 0, sem="acquire", scope="sys") < epoch:
            pass

    return kerneldojo_align_ranks


def rank_devices(judge_device: torch.device, ranks: int) -> list[torch.device]:
    """The devices of ranks 0..ranks-1: the judge's GPU and the ones after it, or CPU slots in CPU mode.
    Raises `Unavailable` when this host has too few GPUs."""
    if judge_device.type == "cpu":
        return [judge_device] * ranks
    first, count = judge_device.index or 0, torch.cuda.device_count()
    if first + ranks > count:
        raise Unavailable(f"this task needs {ranks} GPUs of one host (cuda:{first} to cuda:{first + ranks - 1}); "
                          f"this machine has {count}. Run it on a host with {ranks} GPUs, or in CPU mode.")
    return [torch.device("cuda", first + r) for r in range(ranks)]


class Unavailable(Exception):
    """The task cannot run here (e.g. too few GPUs); the result is `skipped`, with this reason."""


class CollectiveSolution:
    """The `runner.Solution` interface over one worker per rank. Inputs and outputs are the judge's,
    stacked over ranks; each request goes to every rank at once, because each rank's call waits
    for the others. When one rank fails, all workers are killed: a peer left in a barrier would
    otherwise spin until its time limit."""

    def __init__(self, devices: list[torch.device], make_worker: Callable, buffer_bytes: int):
        self.devices = devices
        self._pool = cf.ThreadPoolExecutor(len(devices), thread_name_prefix="kerneldojo-rank")
        starting = [self._pool.submit(make_worker, d) for d in devices]
        cf.wait(starting)
        self.ranks = [f.result() for f in starting if f.exception() is None]
        if len(self.ranks) < len(devices):
            self.close()
            raise next(f.exception() for f in starting if f.exception() is not None)
        # Kept for the solution's life: the workers map this memory, the judge owns it.
        self.memory = PeerRegions(devices, buffer_bytes)
        self._each(lambda r: self.ranks[r].join(r, self.memory.for_rank(r)))

    @property
    def flags(self) -> dict[str, str]:
        merged: dict[str, str] = {}
        for flags in self._each(lambda r: self.ranks[r].flags):
            for check, text in flags.items():
                merged.setdefault(check, text)
        return merged

    def run(self, inputs: tuple, shape: dict, outputs: tuple, watch: bool = True) -> tuple:
        mine = [tuple(t[r].to(d, copy=True) for t in inputs) for r, d in enumerate(self.devices)]
        outs = [tuple(t[r].to(d, copy=True) for t in outputs) for r, d in enumerate(self.devices)]
        got = self._each(lambda r: self.ranks[r].run(mine[r], shape, outs[r], watch))
        for r, rank_inputs in enumerate(mine):  # what a rank did to its inputs shows in the judge's copy
            for full, part in zip(inputs, rank_inputs):
                full[r].copy_(part)
        return tuple(torch.stack([g[i].to(inputs[0].device) for g in got]) for i in range(len(got[0])))

    def time(self, shape: dict, seeds: list[int], output_specs: list, l2_bytes: int, budget_s: float):
        rank_specs = [(size[1:], dtype) for size, dtype in output_specs]
        timed = self._each(lambda r: self.ranks[r].time(shape, seeds, rank_specs, l2_bytes, budget_s))
        if any(t.seeds != timed[0].seeds for t in timed):
            raise Flagged({"timing_channel": message("timing_channel", "the ranks reported different input sets")})
        slowest = max(timed, key=lambda t: t.stats.median_ms)
        home = self.devices[0]
        outputs = [tuple(torch.stack([t.outputs[k][i].to(home) for t in timed]) for i in range(len(output_specs)))
                   if all(t.outputs[k] for t in timed) else () for k in range(len(seeds))]
        return type(slowest)(slowest.stats, slowest.profile, slowest.seeds, outputs)

    def close(self) -> None:
        ranks, self.ranks = self.ranks, []
        for rank in ranks:
            rank.close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _each(self, fn: Callable[[int], object]) -> list:
        futures = [self._pool.submit(fn, r) for r in range(len(self.devices))]
        done, _ = cf.wait(futures, return_when=cf.FIRST_EXCEPTION)
        failed = [f for f in futures if f in done and f.exception() is not None]
        if failed:
            self.close()  # the other ranks' requests end as their workers die
            raise failed[0].exception()
        return [f.result() for f in futures]


def time_nccl_all_reduce(task, case, devices: list[torch.device], l2_bytes: int, limit_s: float = 300.0) -> TimeStats:
    """NCCL's all-reduce (torch.distributed, in place) at this case, one clean process per rank,
    timed by the same code as submissions (a fixed number of runs, ranks aligned by a tiny NCCL
    all-reduce before each start event). The slowest rank's figures."""
    ctx = torch.multiprocessing.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="kerneldojo-nccl-") as folder:
        store = os.path.join(folder, "store")
        processes = [ctx.Process(target=_nccl_rank, args=(task.id, case.shape, r, [str(d) for d in devices],
                                                          store, l2_bytes, results), daemon=True)
                     for r in range(len(devices))]
        for p in processes:
            p.start()
        try:
            replies = [results.get(timeout=limit_s) for _ in processes]
        finally:
            for p in processes:
                p.join(5)
                if p.is_alive():
                    p.kill()
    errors = [r for r in replies if isinstance(r, str)]
    if errors:
        raise RuntimeError(f"timing NCCL's all-reduce failed: {errors[0]}")
    return max(replies, key=lambda s: s.median_ms)


def _nccl_rank(task_id: str, shape: dict, rank: int, devices: list[str], store: str, l2_bytes: int, results) -> None:
    import torch.distributed as dist

    from kerneldojo.graders.timing import pool_size, time_calls
    from kerneldojo.tasks import get_task

    try:
        device = torch.device(devices[rank])
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", store=dist.FileStore(store, len(devices)), rank=rank,
                                world_size=len(devices), device_id=device)
        make = get_task(task_id).reference.make_inputs
        pool = [make(shape, 0, device)[0][rank].clone()]
        pool += [make(shape, seed, device)[0][rank].clone() for seed in range(1, pool_size(pool[0].nbytes, l2_bytes))]
        tiny = torch.zeros(1, device=device)
        calls = [functools.partial(dist.all_reduce, x) for x in pool]
        stats = time_calls(calls, device, l2_bytes, min_runs=COLLECTIVE_RUNS, max_runs=COLLECTIVE_RUNS,
                           before_start=lambda: dist.all_reduce(tiny))
        results.put(stats)
        dist.destroy_process_group()
    except Exception as e:  # the judge reports it; the reference time is then missing, not wrong
        results.put(f"rank {rank}: {type(e).__name__}: {e}")
