"""The evidence pass's worker side (`kerneldojo.graders.evidence` decides): a replay of the submission under
Nsight Compute, whose figures come from ncu, not from the submission's process.

Two programs in one module:

- `gather`, in a fresh worker that never loads the submission: starts
  `ncu --profile-from-start on ... python -m kerneldojo.sandbox.worker.evidence_replay SPEC` as its child
  (so ncu's frontend is a process apart from the submission, under the worker's confinement), then reads
  ncu's CSV (capped) and the replay's raw outputs, exactly the byte count the judge's shapes say.
- `replay`, the profiled program: every kernel it launches is the submission's doing. Inputs are made on
  the CPU from the judge's seeds and copied to the GPU, outputs poisoned with a host buffer copied over
  (copies, not kernels), then one call per input set, and the outputs written as raw bytes (no pickle).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from kerneldojo.sandbox.protocol import read_regular_file, read_regular_tail

CSV_CAP_BYTES = 4 << 20  # ncu's output kept; one row per launch, so thousands of launches fit
# Outputs are written in chunks of this size: the worker's files are capped at 16 MiB (RLIMIT_FSIZE).
CHUNK_BYTES = 8 << 20
LOG_NAME = "replay_output.txt"  # the replay's stdout and stderr (ncu's stdout is the table)


class OutputFileError(ValueError):
    """A replay's output file that is not exactly what the judge asked for (absent, short, long, not a file)."""


def read_raw(path: Path, nbytes: int) -> bytes:
    """Exactly `nbytes` from a regular file the untrusted replay wrote (`protocol.read_regular_file`): a replay
    cannot make this worker read more than it should."""
    try:
        return read_regular_file(path, nbytes, exact=nbytes)
    except ValueError as e:
        raise OutputFileError(str(e)) from None


def output_path(folder: Path, call: int, index: int, chunk: int) -> Path:
    return folder / f"out{call}_{index}_{chunk}.bin"


def read_output(folder: Path, call: int, index: int, nbytes: int) -> bytes:
    """One output of one call, `nbytes` long, from its chunk files (each exactly as long as it must be)."""
    sizes = [min(CHUNK_BYTES, nbytes - start) for start in range(0, nbytes, CHUNK_BYTES)] or [0]
    return b"".join(read_raw(output_path(folder, call, index, chunk), size) for chunk, size in enumerate(sizes))


def write_output(folder: Path, call: int, index: int, data: bytes) -> None:
    for chunk, start in enumerate(range(0, max(len(data), 1), CHUNK_BYTES)):
        output_path(folder, call, index, chunk).write_bytes(data[start:start + CHUNK_BYTES])


def _nbytes(size: list[int], dtype: str) -> int:
    import torch

    return math.prod(size) * getattr(torch, dtype).itemsize


def gather(task_id: str, build, shape: dict, seeds: list[int], output_specs: list, limit_s: float,
           sample: tuple[int, int] | None = None, *, device: str) -> dict:
    """Run the replay under ncu; {"csv", "outputs" (per call, per output: bytes or None), "problems" (why an
    output is missing), "returncode"}, or {"unavailable": why} when ncu is absent. With `sample` (count, seed)
    only the elements at `protocol.sample_positions` are sent back (output k's positions from seed + k): the
    seed stays in this process, which the replay cannot read (it is made undumpable first). Raises nothing of
    the replay's: what the submission did is the judge's to decide from these."""
    import ctypes

    from kerneldojo.graders.ncu import find_ncu, ncu_command

    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: no /proc/<pid>/mem of this process for the replay

    ncu = find_ncu()
    if ncu is None:
        return {"unavailable": "ncu (Nsight Compute) is not on PATH nor in the CUDA toolkit"}
    folder = Path(tempfile.mkdtemp(prefix="evidence-"))
    specs = [[list(size), str(dtype).removeprefix("torch.")] for size, dtype in output_specs]
    spec = {"task": task_id, "device": device, "language": build.language, "source_path": str(build.source_path),
            "libraries": {d: str(p) for d, p in build.libraries.items()}, "shape": shape, "seeds": list(seeds),
            "outputs": specs}
    (folder / "spec.json").write_text(json.dumps(spec))
    target = [sys.executable, "-m", "kerneldojo.sandbox.worker.evidence_replay", str(folder / "spec.json")]
    command = ncu_command(ncu, target, launch_count=None, metrics=("gpu__time_duration.sum",))
    try:
        # stdout is ncu's alone: the replay sends its own (and the submission's) elsewhere before loading it.
        done = subprocess.run(command, capture_output=True, timeout=limit_s, cwd=folder, close_fds=True)
    except subprocess.TimeoutExpired:
        return {"timeout": f"the replay under Nsight Compute ran past {limit_s:.0f} s"}
    outputs, problems = [], []
    for call in range(len(seeds)):
        row = []
        for index, (size, dtype) in enumerate(specs):
            try:
                data = read_output(folder, call, index, _nbytes(size, dtype))
                row.append(data if sample is None else _sampled(data, size, dtype, sample[0], sample[1] + index))
            except OutputFileError as e:
                row.append(None)
                problems.append(str(e))
        outputs.append(row)
    return {"csv": done.stdout[-CSV_CAP_BYTES:].decode(errors="replace"), "outputs": outputs,
            "problems": problems[:10], "returncode": done.returncode,
            "stderr": done.stderr[-4000:].decode(errors="replace"),
            "replay_log": read_regular_tail(folder / LOG_NAME, 4000)}  # its traceback, if it failed


def _sampled(data: bytes, size: list[int], dtype: str, count: int, seed: int) -> bytes:
    import numpy as np
    import torch

    from kerneldojo.sandbox.protocol import sample_positions

    elements = np.frombuffer(data, dtype=np.uint8).reshape(math.prod(size), getattr(torch, dtype).itemsize)
    return elements[sample_positions(len(elements), count, seed).numpy()].tobytes()


def _to_device(t, device):
    """`t` on `device` by one host-to-device copy of its bytes (a memcpy, never a kernel), strides kept."""
    import torch

    raw = torch.empty(0, dtype=torch.uint8).set_(t.untyped_storage())
    moved = raw.to(device)  # contiguous uint8: cudaMemcpy
    return torch.empty(0, dtype=t.dtype, device=device).set_(moved.untyped_storage(), t.storage_offset(),
                                                             t.shape, t.stride())


def _to_host_bytes(t) -> bytes:
    """The logical content of a CUDA tensor, by one device-to-host copy of its storage (no kernel), then
    arranged on the host."""
    import torch

    raw = torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage()).cpu()
    host = torch.empty(0, dtype=t.dtype).set_(raw.untyped_storage(), t.storage_offset(), t.shape, t.stride())
    return host.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()  # as bytes: numpy has no fp8


def _quiet_triton_benchmarks() -> None:
    """Triton's autotuner clears L2 before each benchmark run with a 256 MB torch fill, a kernel that is no
    part of any call: here it clears nothing (this replay is never timed by events), so that every kernel in
    the replay is the submission's own doing. A submission that restores it only adds kernels to its own count."""
    try:
        from triton import runtime

        type(runtime.driver.active).clear_cache = lambda self, cache: None
    except Exception:  # no Triton, or another driver layout: its fills then count as the submission's
        pass


def replay(spec: dict) -> None:
    import torch

    from kerneldojo.graders.correctness import poisoned_like
    from kerneldojo.sandbox.device import resolve_device
    from kerneldojo.sandbox.protocol import Build
    from kerneldojo.tasks import get_task

    from .harness import Solution
    from .syscall_filter import before_submission_code

    # ncu's stdout is the table the judge reads: nothing of this process's goes there.
    out = os.open(LOG_NAME, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    _quiet_triton_benchmarks()
    before_submission_code()
    task, device = get_task(spec["task"]), resolve_device(spec["device"])
    shape, cpu = spec["shape"], torch.device("cpu")
    templates = tuple(torch.empty(size, dtype=getattr(torch, dtype)) for size, dtype in spec["outputs"])
    # Everything made before the submission loads, on the host, then copied.
    sets = [tuple(_to_device(t, device.torch_device) for t in task.reference.make_inputs(shape, seed, cpu))
            for seed in spec["seeds"]]
    out_sets = [tuple(_to_device(t, device.torch_device) for t in poisoned_like(templates)) for _ in sets]
    torch.cuda.synchronize(device.torch_device)
    build = Build(spec["language"], Path(spec["source_path"]), {d: Path(p) for d, p in spec["libraries"].items()})
    solution = Solution(task, build, device)
    results = [solution.run(inputs, shape, outputs, watch=False) for inputs, outputs in zip(sets, out_sets)]
    torch.cuda.synchronize(device.torch_device)
    for call, got in enumerate(results):
        got = got if isinstance(got, (tuple, list)) else (got,)
        for index, (t, template) in enumerate(zip(got, templates)):
            if (isinstance(t, torch.Tensor) and t.is_cuda and tuple(t.shape) == tuple(template.shape)
                    and t.dtype == template.dtype):
                write_output(Path.cwd(), call, index, _to_host_bytes(t.as_subclass(torch.Tensor)))


if __name__ == "__main__":
    replay(json.loads(Path(sys.argv[1]).read_text()))
