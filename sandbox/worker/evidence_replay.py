"""The evidence pass's worker side (`kerneldojo.graders.evidence` decides): a replay of the submission under
Nsight Compute, whose figures come from ncu, not from the submission's process.

Two programs in one module:

- `gather`, in a fresh worker that never loads the submission: starts
  `ncu --profile-from-start on ... python -m kerneldojo.sandbox.worker.evidence_replay SPEC` as its child
  (so ncu's frontend is a process apart from the submission, under the worker's confinement), then reads
  ncu's CSV (capped) and the replay's raw outputs, exactly the byte count the judge's shapes say. A spare
  worker may `arm` first: the replay starts under ncu before any submission is known, readies itself (the
  seconds of imports and CUDA context a step would otherwise wait for: `bench_evidence_cost.py`) and waits on
  a FIFO for the spec that `gather` then sends.
- `replay`, the profiled program: every kernel it launches is the submission's doing. Inputs are made on
  the CPU from the judge's seeds and copied to the GPU, outputs poisoned with a host buffer copied over
  (copies, not kernels), then one call per input set, and the outputs written as raw bytes (no pickle).
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
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


# This worker's replay, started under ncu ahead of its spec (`arm`): {"process", "folder", "fifo", "prep"}, or None.
_armed: dict | None = None


def arm(device: str, prep: dict | None = None) -> None:
    """Start the replay under ncu now, before any submission is known: it imports torch and the task library and
    makes its CUDA context (seconds that no step should wait for), with `prep` ({"task", "cases": [{"shape", "seeds",
    "outputs"}, ...]}: every bench case, with the judge's seeds) also their inputs on the host, launches no kernel,
    then waits on a FIFO for the spec `gather` sends, which names the case. What it runs before the spec is this
    module's code alone."""
    global _armed
    from kerneldojo.graders.ncu import find_ncu

    ncu = find_ncu()
    if ncu is None or _armed is not None:
        return
    folder = Path(tempfile.mkdtemp(prefix="evidence-"))
    fifo = folder / "spec.fifo"
    os.mkfifo(fifo, 0o600)
    arguments = ["--wait", str(fifo), device]
    if prep is not None:
        prep = {**prep, "device": device}
        (folder / "prep.json").write_text(json.dumps(prep))
        arguments.append(str(folder / "prep.json"))
    process = subprocess.Popen(_profiled(ncu, arguments, device), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               cwd=folder, close_fds=True)
    _armed = {"process": process, "folder": folder, "fifo": fifo, "prep": prep}


def _prepared_for(armed: dict, spec: dict) -> bool:
    """An armed replay serves this spec: it prepared nothing, or this task with this case's seeds and outputs."""
    prep = armed["prep"]
    if prep is None:
        return True
    asked = {k: spec[k] for k in ("shape", "seeds", "outputs")}
    return prep["task"] == spec["task"] and prep["device"] == spec["device"] and asked in prep["cases"]


def _profiled(ncu: str, arguments: list[str], device: str) -> list[str]:
    import torch

    from kerneldojo.graders.ncu import ncu_command, replay_metrics

    arch = None
    if device.startswith("cuda") and torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability(device)
        arch = 10 * major + minor
    target = [sys.executable, "-m", "kerneldojo.sandbox.worker.evidence_replay", *arguments]
    return ncu_command(ncu, target, launch_count=None, metrics=replay_metrics(arch))


def _send_spec(armed: dict, spec: dict, deadline: float) -> bool:
    """The spec into the armed replay's FIFO once it reads it; False when it died first (or never opened it)."""
    while True:
        try:
            fd = os.open(armed["fifo"], os.O_WRONLY | os.O_NONBLOCK)  # ENXIO until the replay opens it
            break
        except OSError as e:
            if e.errno != errno.ENXIO or armed["process"].poll() is not None or time.monotonic() > deadline:
                return False
            time.sleep(0.01)
    try:
        os.set_blocking(fd, True)
        data = json.dumps(spec).encode()
        while data:
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)
    return True


def gather(task_id: str, build, shape: dict, seeds: list[int], output_specs: list, limit_s: float,
           sample: tuple[int, int] | None = None, *, device: str) -> dict:
    """Run the replay under ncu (the armed one, if `arm` started it and it is alive); {"csv", "outputs" (per call,
    per output: bytes or None), "problems" (why an output is missing), "returncode"}, or {"unavailable": why}
    when ncu is absent. With `sample` (count, seed) only the elements at `protocol.sample_positions` are sent
    back (output k's positions from seed + k): the seed stays in this process, which the replay cannot read (it
    is made undumpable first). Raises nothing of the replay's: what the submission did is the judge's to decide
    from these."""
    global _armed
    import ctypes

    from kerneldojo.graders.ncu import find_ncu

    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: no /proc/<pid>/mem of this process for the replay

    ncu = find_ncu()
    if ncu is None:
        return {"unavailable": "ncu (Nsight Compute) is not on PATH nor in the CUDA toolkit"}
    deadline = time.monotonic() + limit_s
    specs = [[list(size), str(dtype).removeprefix("torch.")] for size, dtype in output_specs]
    spec = {"task": task_id, "device": device, **build.paths(), "shape": shape, "seeds": list(seeds), "outputs": specs}
    armed, _armed = _armed, None  # one replay per arming: a second gather starts its own
    started = time.monotonic()
    used_armed = armed is not None and _prepared_for(armed, spec) and _send_spec(armed, spec, deadline)
    waited = time.monotonic() - started
    if used_armed:
        folder, process = armed["folder"], armed["process"]
    else:
        if armed is not None:  # it died before reading its spec (ncu refused?), or prepared another case
            armed["process"].kill()
            armed["process"].wait()
            shutil.rmtree(armed["folder"], ignore_errors=True)  # trusted code's files only: it never got a spec
        folder = Path(tempfile.mkdtemp(prefix="evidence-"))
        (folder / "spec.json").write_text(json.dumps(spec))
        process = subprocess.Popen(_profiled(ncu, [str(folder / "spec.json")], device), stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, cwd=folder, close_fds=True)
    try:
        return _gathered(process, folder, specs, len(seeds), sample, deadline, limit_s, waited, used_armed)
    finally:  # what the replay wrote goes with it (a worker's scratch goes anyway; a test's /tmp would keep it)
        with contextlib.suppress(OSError, RecursionError):  # a tree too deep is the worker's scratch's to drop
            shutil.rmtree(folder)


def _gathered(process, folder: Path, specs: list, calls: int, sample, deadline: float, limit_s: float, waited: float,
              used_armed: bool) -> dict:  # fmt: skip
    try:
        # stdout is ncu's alone: the replay sends its own (and the submission's) elsewhere before loading it.
        started = time.monotonic()
        stdout, stderr = process.communicate(timeout=max(deadline - time.monotonic(), 0.1))
        seconds = {"wait": waited, "replay": time.monotonic() - started}
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return {"timeout": f"the replay under Nsight Compute ran past {limit_s:.0f} s"}
    outputs, problems = [], []
    for call in range(calls):
        row = []
        for index, (size, dtype) in enumerate(specs):
            try:
                data = read_output(folder, call, index, _nbytes(size, dtype))
                row.append(data if sample is None else _sampled(data, size, dtype, sample[0], sample[1] + index))
            except OutputFileError as e:
                row.append(None)
                problems.append(str(e))
        outputs.append(row)
    return {"csv": stdout[-CSV_CAP_BYTES:].decode(errors="replace"), "outputs": outputs,
            "problems": problems[:10], "returncode": process.returncode, "armed": used_armed, "seconds": seconds,
            "stderr": stderr[-4000:].decode(errors="replace"),
            "replay_log": read_regular_tail(folder / LOG_NAME, 4000)}  # its traceback, if it failed


def _sampled(data: bytes, size: list[int], dtype: str, count: int, seed: int) -> bytes:
    import numpy as np
    import torch

    from kerneldojo.sandbox.protocol import sample_positions

    elements = np.frombuffer(data, dtype=np.uint8).reshape(math.prod(size), getattr(torch, dtype).itemsize)
    return elements[sample_positions(len(elements), count, seed).numpy()].tobytes()


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


def _own_output() -> None:
    """ncu's stdout is the table the judge reads: nothing of this process's goes there."""
    out = os.open(LOG_NAME, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)


def prepare(spec: dict) -> tuple:
    """Everything made before the submission loads, on the host: the inputs of one case from the judge's seeds and
    its poisoned outputs. Seconds for a large case (vector_add's 134M elements: 2 GB of normal samples on one core),
    which an armed replay spends, for every bench case, before any step waits for it."""
    import torch

    from kerneldojo.graders.correctness import poisoned_like
    from kerneldojo.tasks import task_from_ref

    task, cpu = task_from_ref(spec["task"]), torch.device("cpu")
    templates = tuple(torch.empty(size, dtype=getattr(torch, dtype)) for size, dtype in spec["outputs"])
    sets = [task.reference.make_inputs(spec["shape"], seed, cpu) for seed in spec["seeds"]]
    return task, spec["shape"], templates, sets, [poisoned_like(templates) for _ in sets]


def run(prepared: tuple, spec: dict) -> None:
    """Load the submission, one call per input set, and write the outputs as raw bytes (no pickle)."""
    import torch

    from kerneldojo.graders.correctness import same_layout_copy
    from kerneldojo.sandbox.device import resolve_device
    from kerneldojo.sandbox.protocol import Build

    from .confine import nest_domain
    from .harness import Solution
    from .syscall_filter import before_submission_code

    task, shape, templates, host_sets, host_out_sets = prepared
    device = resolve_device(spec["device"])
    # Copied now, not while armed: the judge holds the GPU shared during this pass, never during another's timing.
    sets, out_sets = ([tuple(same_layout_copy(t, device.torch_device) for t in group) for group in groups]
                      for groups in (host_sets, host_out_sets))
    host_sets.clear()  # the host copies go now, whoever else holds the lists (round 26: they stayed through ncu)
    host_out_sets.clear()
    torch.cuda.synchronize(device.torch_device)
    print(f"the replay's own domain: {nest_domain()}")  # ncu and the gathering worker out of its reach (round 35)
    before_submission_code()
    solution = Solution(task, Build.from_paths(spec), device)
    results = [solution.run(inputs, shape, outputs, watch=False) for inputs, outputs in zip(sets, out_sets)]
    torch.cuda.synchronize(device.torch_device)
    for call, got in enumerate(results):
        got = got if isinstance(got, (tuple, list)) else (got,)
        for index, (t, template) in enumerate(zip(got, templates)):
            if (isinstance(t, torch.Tensor) and t.is_cuda and tuple(t.shape) == tuple(template.shape)
                    and t.dtype == template.dtype):
                write_output(Path.cwd(), call, index, _to_host_bytes(t.as_subclass(torch.Tensor)))


def replay(spec: dict) -> None:
    _own_output()
    _quiet_triton_benchmarks()
    run(prepare(spec), spec)


def armed_replay(fifo: Path, device: str, prep: Path | None) -> None:
    """An armed replay: what every replay needs before the submission (imports, the task library, the CUDA context,
    Triton's driver; with `prep`, every bench case's inputs and outputs on the host), then the spec, whenever `gather`
    sends it. No kernel is launched before the submission's, and nothing is copied to the GPU before the spec: every
    launch ncu records stays the submission's, and no other judge's timing shares the GPU with the copies."""
    import torch

    from kerneldojo.tasks import list_tasks

    from . import harness  # noqa: F401 (its imports, ahead)

    _own_output()
    _quiet_triton_benchmarks()
    list_tasks()
    torch.cuda.set_device(device)
    torch.empty(1, device=device)  # an allocation, no kernel
    try:
        from triton import runtime

        runtime.driver.active.get_current_device()
    except Exception:  # no Triton here: a Triton submission then fails in the replay, and says so
        pass
    # Every bench case, whichever the judge draws later: nothing here depends on its draw (red team round 25: one
    # prepared case showed in the replay's memory, which other workers of the host can read in /proc/<pid>/status).
    drawn = json.loads(prep.read_text()) if prep else {"cases": []}
    cases = drawn["cases"]
    prepared = [prepare({**case, "task": drawn["task"]}) for case in cases]
    with open(fifo) as sent:  # blocks until gather opens it, and reads until gather closes it
        spec = json.loads(sent.read())
    chosen = next((p for p, case in zip(prepared, cases) if case["shape"] == spec["shape"]), None)
    del prepared
    run(chosen or prepare(spec), spec)


if __name__ == "__main__":
    if sys.argv[1] == "--wait":
        armed_replay(Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4]) if len(sys.argv) > 4 else None)
    else:
        replay(json.loads(Path(sys.argv[1]).read_text()))
