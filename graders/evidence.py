"""The evidence pass (issue 13): a verdict's GPU figures checked against Nsight Compute's record of a replay
that a fresh worker ran (`sandbox.worker.evidence_replay`), with names the judge computes itself.

Everything here runs in the judge on data the submission could not write except through ncu itself: the
kernels of the replay and their durations (ncu's CSV), the replay's outputs as raw bytes in shapes the judge
chose, the submission's own kernel names from its source (Triton, by `ast`) and from the judge-built library
(CUDA/CuTe, by cuobjdump). From them: `evidence_wrong` (outputs under the profiler not the reference's),
`no_kernel`, `vendor_kernel`, `decoy_kernel`, `host_memory` (kernels that moved the data through host memory) and
`time_disagrees` (ncu's lower bound on one call's GPU work far above what the worker claimed).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import torch

from kerneldojo.graders.checks import message
from kerneldojo.graders.ncu import HOST_MEMORY_METRIC, SECTOR_BYTES
from kerneldojo.graders.profile import (  # noqa: F401 (triton_kernel_names re-exported)
    OwnKernels,
    library_kernel,
    library_like,
    triton_kernel_names,
    unexplained_kernel,
)
from kerneldojo.sandbox.protocol import CompileError, sample_positions
from kerneldojo.tasks.spec import DEFAULT_ALLOWED_OPS

REPLAY_CALLS = 2  # replayed calls, each on its own input set from fresh seeds
# Elements of each output compared (at positions drawn by the judge): a full GB-sized output would cross the
# channel and be compared whole for every step; a wrong kernel is wrong in far more places than this misses.
SAMPLE_ELEMENTS = 1 << 16
# Below this share of GPU time in the submission's own kernels, something else did the work.
MIN_OWN_SHARE = 0.1
# ncu replays each kernel serialized, caches flushed before each (--cache-control all) and clocks as they are;
# the timed run flushes L2 before each call, but within a call a kernel may find its predecessor's data in L2
# and back-to-back launches overlap their tails, which ncu's serialized replay denies. So a kernel's ncu
# duration can exceed its share of the event time, most for calls of many short kernels: 1.5x plus 20 µs
# absorbs that (the GPU suite measures the ratio on the honest set), while a forged timer claims far less.
TIME_SLACK, TIME_SLACK_MS = 1.5, 0.02
# No honest kernel of a task touches host memory (`ncu.HOST_MEMORY_METRIC`); the answer computed on the host and
# moved by the submission's own kernels moves at least its inputs so (red team round 88).
HOST_MEMORY_SHARE, HOST_MEMORY_SLACK_BYTES = 1 / 16, 64 << 10


def check_own_names(names: set[str]) -> None:
    """Refuse a build whose own kernels are named like a vendor library's, Inductor's or the harness's
    (`library_like`)."""
    clashing = sorted(n for n in names if library_like(n))
    if clashing:
        raise CompileError(f"kernel name(s) {', '.join(clashing[:5])} look like a vendor library's (cuBLAS, cuDNN, "
                           f"CUTLASS, flash attention), torch's (Inductor's generated kernels) or the judge's own "
                           "(kerneldojo_...), which the judge must tell apart from yours; rename them")


@dataclass
class Figures:
    """What ncu's record says about the replay."""

    launches: int
    kernel_ms: float  # one call's GPU work, a lower bound: per stream and kernel name the shortest launch, summed
    # over the stream's names, the busiest stream's sum (streams may overlap: red team round 91)
    own_share: float | None  # of all kernel time in the replay, the submission's own kernels' (None: no kernel)
    vendor: list[str]
    unexplained: list[str]  # `profile.unexplained_kernel`s: torch's work that no allowed operator launches
    names: list[str]
    host_bytes: float = 0.0  # per replayed call, every kernel's traffic to host memory (HOST_MEMORY_METRIC)


def figures(launches: list[dict], own: OwnKernels, allowed_ops: frozenset[str] = DEFAULT_ALLOWED_OPS,
            calls: int = REPLAY_CALLS) -> Figures:
    """Per stream and kernel name the minimum launch duration, summed over the stream, the busiest stream's sum:
    robust to Triton's autotuning (one name launched with several configs, the slow ones included) and to launches
    made once, never above one call's work for kernels every call launches, and never above the time of kernels
    that overlap on several streams (ncu replays them one at a time; the event time is their union)."""
    shortest: dict[tuple[str, str], float] = {}
    total, own_ms, sectors = 0.0, 0.0, 0.0
    for launch in launches:
        name, ms = str(launch["Kernel Name"]), float(launch.get("gpu__time_duration.sum", 0.0))
        key = (str(launch.get("Stream", "")), name)
        shortest[key] = min(ms, shortest.get(key, math.inf))
        total += ms
        own_ms += ms if name in own else 0.0
        sectors += float(launch.get(HOST_MEMORY_METRIC, 0.0))
    per_stream: dict[str, float] = defaultdict(float)
    for (stream, _), ms in shortest.items():
        per_stream[stream] += ms
    names = {name for _, name in shortest}
    vendor = sorted({n[:60] for n in names if n not in own and library_kernel(n)})
    unexplained = sorted({n[:60] for n in names if n not in own and unexplained_kernel(n, allowed_ops)})
    return Figures(len(launches), max(per_stream.values(), default=0.0), own_ms / total if total > 0 else None,
                   vendor, unexplained, sorted(names), sectors * SECTOR_BYTES / max(calls, 1))


def decide(found: Figures, claimed_ms: float, case: str, vendor_forbidden: bool, decoy_forbidden: bool,
           torch_forbidden: bool = True, data_bytes: int | None = None) -> dict[str, str]:  # fmt: skip
    """The flags ncu's record raises. `claimed_ms`: the time per call the speedup pays for this case (the larger of
    the worker's event median and its profile's busy time, `CaseTiming.scored_ms`); `vendor_forbidden`: the task
    allows no vendor library's operator; `decoy_forbidden`: the task does not allow them all (an adapted suite's
    problem may keep torch's kernels); `torch_forbidden`: the task allows no operator beyond the defaults;
    `data_bytes`: one call's inputs and outputs, which bound the host-memory traffic an honest call may have."""
    fired = {}
    if data_bytes is not None and found.host_bytes > HOST_MEMORY_SHARE * data_bytes + HOST_MEMORY_SLACK_BYTES:
        fired["host_memory"] = message("host_memory", f"{case}: kernels moved {found.host_bytes / 1e6:.3g} MB per call "
                                                      f"to or from host memory (Nsight Compute), against "
                                                      f"{data_bytes / 1e6:.3g} MB of inputs and outputs")
    if not found.launches:
        fired["no_kernel"] = message("no_kernel", f"{case}, replayed under Nsight Compute")
    if found.vendor and vendor_forbidden:
        fired["vendor_kernel"] = message("vendor_kernel", "; ".join(found.vendor[:3]))
    if found.unexplained and torch_forbidden:
        fired["torch_kernel"] = message("torch_kernel", "; ".join(found.unexplained[:3]) + " (Nsight Compute)")
    if found.own_share == 0 and not decoy_forbidden:  # a task allowing torch's kernels still needs one of its own
        fired["no_kernel"] = message("no_kernel", f"{case}: every kernel was PyTorch's or a library's (Nsight Compute)")
    elif found.own_share is not None and found.own_share < MIN_OWN_SHARE and decoy_forbidden:
        fired["decoy_kernel"] = message("decoy_kernel", f"{1 - found.own_share:.0%} (Nsight Compute, {case})")
    if found.kernel_ms > TIME_SLACK * claimed_ms + TIME_SLACK_MS:
        detail = (f"{case}: Nsight Compute measured at least {found.kernel_ms * 1e3:.1f} µs of GPU work per call, "
                  f"the worker reported {claimed_ms * 1e3:.1f} µs")
        fired["time_disagrees"] = message("time_disagrees", detail)
    return fired


def outputs_from_bytes(rows: list, specs: list[tuple], device: torch.device) -> list[tuple[torch.Tensor, ...]]:
    """The replay's outputs, per call, as tensors of the judge's shapes and dtypes; ValueError when a row is not
    exactly that (the worker already refused files of the wrong size; this checks its reply)."""
    if not isinstance(rows, list) or len(rows) > REPLAY_CALLS * 4:
        raise ValueError("the replay's outputs are not a list of calls")
    calls = []
    for row in rows:
        if not isinstance(row, list) or len(row) != len(specs):
            raise ValueError("a call's outputs are not one per output")
        tensors = []
        for data, (size, dtype) in zip(row, specs):
            nbytes = math.prod(size) * dtype.itemsize
            if not isinstance(data, bytes) or len(data) != nbytes:
                raise ValueError(f"an output of {len(data) if isinstance(data, bytes) else 'no'} bytes, expected "
                                 f"{nbytes}")
            raw = torch.frombuffer(bytearray(data), dtype=torch.uint8) if nbytes else torch.empty(0, dtype=torch.uint8)
            tensors.append(raw.view(dtype).reshape(size).to(device))
        calls.append(tuple(tensors))
    return calls


def sampled_outputs(outputs: tuple[torch.Tensor, ...], count: int, seed: int) -> tuple[torch.Tensor, ...]:
    """The elements of each output the replay sends back (`protocol.sample_positions`, output k from seed + k)."""
    return tuple(t.reshape(-1)[sample_positions(t.numel(), count, seed + k).to(t.device)]
                 for k, t in enumerate(outputs))


def launches_by_name(launches: list[dict]) -> dict[str, list[float]]:
    """Durations (ms) per kernel name, for a failure's message."""
    by_name: dict[str, list[float]] = defaultdict(list)
    for launch in launches:
        by_name[str(launch["Kernel Name"])].append(float(launch.get("gpu__time_duration.sum", 0.0)))
    return dict(by_name)
