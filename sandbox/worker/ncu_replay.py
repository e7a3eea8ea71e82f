"""The program Nsight Compute profiles: a replay of one case of a loaded submission, in a process of its own.

    ncu ... python -m kerneldojo.sandbox.worker.ncu_replay SPEC.json

Started by the worker (`Solution.ncu`), so it runs under the worker's confinement. It loads the submission,
makes the inputs, calls once to compile (Triton's JIT), and only then opens ncu's range
(`cudaProfilerStart`, with ncu's `--profile-from-start off`): input generation and JIT are not profiled."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from kerneldojo.sandbox.device import resolve_device, synchronize
from kerneldojo.sandbox.protocol import Build
from kerneldojo.tasks import task_from_ref

from .harness import Solution
from .syscall_filter import before_submission_code


def replay(spec: dict) -> None:
    before_submission_code()
    task, device = task_from_ref(spec["task"]), resolve_device(spec["device"])
    build = Build.from_paths(spec)
    solution = Solution(task, build, device)
    shape = spec["shape"]
    inputs = task.reference.make_inputs(shape, spec["seed"], device.torch_device)
    outputs = tuple(torch.empty(size, dtype=getattr(torch, dtype), device=device.torch_device)
                    for size, dtype in spec["outputs"])
    solution.run(inputs, shape, outputs, watch=False)  # compile outside the profiled range
    synchronize(device)
    torch.cuda.profiler.start()
    for _ in range(spec["calls"]):
        solution.run(inputs, shape, outputs, watch=False)
        synchronize(device)
    torch.cuda.profiler.stop()


if __name__ == "__main__":
    replay(json.loads(Path(sys.argv[1]).read_text()))
