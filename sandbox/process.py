"""The process backend: every submission runs in its own single-use worker process.

The judge keeps what decides the score (seeds, inputs, reference outputs, the comparison, the
reference timings) and never imports the submission. A worker is spawned ahead of need (torch
imported), hardens itself (its own process group, rlimits, no network where the kernel lets it
drop it, output to a capped file in a private scratch folder), then loads one submission and
answers requests: run on these inputs, time these calls, report forbidden calls. Tensors cross as
shared memory (CPU) or CUDA IPC handles (GPU). Each request has a wall-clock limit; past it, or
if the worker dies (a segfault, `os._exit`, a CUDA fault), the whole process group is killed and
the judge reports it. The worker is then discarded, so nothing it did reaches the next step.

What this does not yet stop (docs/sandbox.md, the sandbox issue): reading files the judge's user
can read, tracing the judge (same user), host and GPU memory exhaustion beyond the rlimits, and a
submission forging the timing it reports from inside the worker.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import resource
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch
import torch.multiprocessing as mp

from kerneldojo.graders.checks import ForbiddenOps
from kerneldojo.graders.compile import Build, CompileError
from kerneldojo.graders.correctness import WrongOutput
from kerneldojo.result import TimeStats
from kerneldojo.tasks import Task

from .device import Device
from .runner import SubmissionError

# Wall-clock limits per request, in seconds: loading includes Triton's first imports.
LIMITS_S = {"load": 120.0, "run": 60.0, "time": 300.0, "forbidden": 10.0}
OUTPUT_CAP_BYTES = 16 << 20
OPEN_FILES_CAP = 4096
CPU_SECONDS_CAP = 1800  # a backstop behind the wall-clock limits: CPU time summed over threads
OUTPUT_TAIL_CHARS = 2000
CLONE_NEWNET = 0x40000000


class SubmissionTimeout(SubmissionError):
    """The submission ran past a wall-clock limit and its worker was killed."""


class WorkerSolution:
    """The `runner.Solution` interface, served by a worker process."""

    def __init__(self, task: Task, build: Build, device: Device, limits: dict[str, float] | None = None):
        self.limits = {**LIMITS_S, **(limits or {})}
        self._worker = _take_worker(device)
        self._call("load", task.id, build)

    @property
    def forbidden_called(self) -> list[str]:
        return self._call("forbidden")

    def run(self, inputs: tuple, shape: dict, outputs: tuple, watch: bool = True) -> tuple:
        got = self._call("run", inputs, shape, outputs, watch)
        # Copies owned by the judge: the worker frees its memory, and cannot change them later.
        return tuple(t.clone() if isinstance(t, torch.Tensor) else t for t in (outputs if got is None else got))

    def time(self, arg_sets: list, shape: dict, output_sets: list, l2_bytes: int, budget_s: float) -> TimeStats:
        return self._call("time", arg_sets, shape, output_sets, l2_bytes, budget_s)

    def close(self) -> None:
        self._worker.stop()

    def _call(self, op: str, *args):
        return self._worker.call(op, args, self.limits[op])


class _Worker:
    def __init__(self, device: Device):
        ctx = mp.get_context("spawn")
        self.scratch = Path(tempfile.mkdtemp(prefix="kerneldojo-worker-"))
        self.requests, self.replies = ctx.Queue(), ctx.Queue()
        device_spec = str(device.torch_device) if device.mode == "gpu" else "cpu"
        self.process = ctx.Process(
            target=_worker_main, args=(self.requests, self.replies, device_spec, str(self.scratch)), daemon=True
        )
        self.process.start()

    def call(self, op: str, args: tuple, limit_s: float):
        self.requests.put((op, args))
        deadline = time.monotonic() + limit_s
        while True:
            try:
                kind, payload = self.replies.get(timeout=0.1)
                break
            except queue.Empty:
                if not self.process.is_alive():
                    tail = self._tail_note()
                    self.stop()
                    raise SubmissionError(f"the worker process died ({_describe_exit(self.process.exitcode)}) "
                                          f"during {op}{tail}") from None
                if time.monotonic() > deadline:
                    self._kill()
                    tail = self._tail_note()
                    self.stop()
                    raise SubmissionTimeout(f"{op} ran past its {limit_s:g} s limit; the worker was killed{tail}"
                                            ) from None
        if kind == "ok":
            return payload
        raise {"compile_error": CompileError, "runtime_error": SubmissionError, "wrong": WrongOutput}[kind](payload)

    def output_tail(self) -> str:
        path = self.scratch / "output.txt"
        with contextlib.suppress(OSError), open(path, "rb") as f:
            f.seek(max(0, path.stat().st_size - OUTPUT_TAIL_CHARS))
            return f.read().decode(errors="replace")
        return ""

    def _tail_note(self) -> str:
        tail = self.output_tail().strip()
        return f"\nlast output of the submission:\n{tail[-OUTPUT_TAIL_CHARS:]}" if tail else ""

    def stop(self) -> None:
        self._kill()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def _kill(self) -> None:
        # Single use: no graceful exit to wait for. The worker leads its own process group, so this
        # also ends whatever the submission started.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        # Reap it off the critical path; the exit code is read only after a death or a timeout.
        threading.Thread(target=self.process.join, args=(10,), daemon=True).start()


# One spare worker per device, started ahead so that its start-up is off the step's critical path.
_spares: dict[str, _Worker] = {}
_spares_lock = threading.Lock()  # the GPU pool takes workers from several threads


def _take_worker(device: Device) -> _Worker:
    key = str(device.torch_device)
    with _spares_lock:
        worker = _spares.pop(key, None)
        if worker is None or not worker.process.is_alive():
            worker = _Worker(device)
        _spares[key] = _Worker(device)
    return worker


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


# ---------------------------------------------------------------------------------------------
# Inside the worker.


def _worker_main(requests, replies, device_spec: str, scratch: str, outputs_by_value: bool = False) -> None:
    """The request loop. `requests.get()` / `replies.put()`: queues here, a socket in `sandbox.docker`.

    With `outputs_by_value` (no shared memory with the judge), native entry points' outputs are sent back too.
    """
    _harden(Path(scratch))
    if device_spec != "cpu":  # Triton launches, events and bare synchronize() use the current device
        torch.cuda.set_device(device_spec)
    # Warm up while no submission is waiting: imports, the task library, the CUDA context.
    from kerneldojo.sandbox.device import resolve_device
    from kerneldojo.sandbox.runner import Solution
    from kerneldojo.tasks import get_task, list_tasks

    list_tasks()
    with ForbiddenOps([]):  # its first use imports torch._dynamo, over a second
        torch.empty(1, device=device_spec)
    with contextlib.suppress(Exception):  # Triton's runtime (launcher, interpreter) on a throwaway kernel
        _launch_trivial_triton_kernel(device_spec)

    solution, last = None, None
    while True:
        op, args = requests.get()
        if op == "exit":
            return
        try:
            if op == "load":
                task_id, build = args
                solution = Solution(get_task(task_id), build, resolve_device(device_spec))
                reply = None
            elif op == "run":
                last = solution.run(*args)  # kept alive until the next request: the judge maps it via IPC
                if device_spec != "cpu":
                    torch.cuda.synchronize()
                # Native entry points wrote into the judge's own output tensors; nothing to send back.
                reply = None if solution.build.libraries and not outputs_by_value else last
            elif op == "time":
                reply = solution.time(*args)
            elif op == "forbidden":
                reply = list(solution.forbidden_called)
            replies.put(("ok", reply))
        except CompileError as e:
            replies.put(("compile_error", str(e)))
        except WrongOutput as e:
            replies.put(("wrong", str(e)))
        except SubmissionError as e:
            replies.put(("runtime_error", str(e)))
        except Exception as e:  # a CUDA fault at the synchronize, an unpicklable output, ...
            replies.put(("runtime_error", f"{type(e).__name__}: {e}"))
        sys.stdout.flush()


def _launch_trivial_triton_kernel(device_spec: str) -> None:
    from kerneldojo.sandbox.triton_interpreter import interpreter

    with interpreter(device_spec == "cpu"):
        import triton
        import triton.language as tl

        @triton.jit
        def fill(out_ptr, BLOCK: tl.constexpr):
            tl.store(out_ptr + tl.arange(0, BLOCK), tl.zeros([BLOCK], tl.float32))

        fill[(1,)](torch.empty(16, device=device_spec), BLOCK=16)


def _harden(scratch: Path) -> None:
    """Before any submission code runs: own process group, limits, no network, output to a file."""
    os.setsid()
    os.chdir(scratch)
    for limit, value in ((resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, OUTPUT_CAP_BYTES),
                         (resource.RLIMIT_NOFILE, OPEN_FILES_CAP), (resource.RLIMIT_CPU, CPU_SECONDS_CAP)):
        hard = resource.getrlimit(limit)[1]
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(limit, (value, value))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the cap fails instead of killing
    out = os.open(scratch / "output.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(out, 1)
    os.dup2(out, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    # A new network namespace has only a downed loopback: no connection leaves. Needs privilege
    # (root, or user namespaces); without it the worker runs with the host's network.
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        os.environ["KERNELDOJO_NETWORK_ISOLATION"] = "unavailable"
