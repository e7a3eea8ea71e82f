"""The process backend: every submission runs in its own single-use worker process.

The judge keeps what decides the score (seeds, inputs, reference outputs, the comparison, the
reference timings) and never imports the submission. A worker is spawned ahead of need (torch
imported), hardens itself (its own process group, rlimits, and where the kernel allows: user, pid,
mount, ipc and network namespaces, a read-only file system, cgroup limits, no capabilities; see
`sandbox.isolation`; output to a capped file in a private scratch folder), then loads one submission and
answers requests: run on these inputs, time these calls, report forbidden calls. A worker that never
loads a submission also times the task's reference (`time_reference_in_worker`), so that reference
and submission are timed by the same code in the same kind of clean process. Tensors cross as
shared memory (CPU) or CUDA IPC handles (GPU). Each request has a wall-clock limit; past it, or
if the worker dies (a segfault, `os._exit`, a CUDA fault), the whole process group is killed and
the judge reports it. The worker is then discarded, so nothing it did reaches the next step.

What this does not stop is listed in docs/sandbox.md (threat model): among it GPU memory
exhaustion, and in GPU mode the judge's pid namespace is shared (CUDA IPC).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import ctypes
import dataclasses
import functools
import io
import os
import pickle
import queue
import resource
import shutil
import signal
import sys
import tempfile
import threading
import time
from multiprocessing import resource_sharer
from pathlib import Path

import torch
import torch.multiprocessing as mp

from kerneldojo.graders.checks import Flagged, ForbiddenOps, message
from kerneldojo.graders.compile import Build, CompileError
from kerneldojo.graders.correctness import WrongOutput
from kerneldojo.graders.timing import time_calls
from kerneldojo.result import TimeStats
from kerneldojo.tasks import Task

from . import isolation
from .device import Device
from .runner import SubmissionError, TimedRuns

# Wall-clock limits per request, in seconds: loading includes Triton's first imports; timing the
# reference includes the worker's start and torch.compile of the reference (slow for a big model).
LIMITS_S = {"load": 120.0, "compile": 120.0, "run": 60.0, "time": 300.0, "flags": 10.0, "join": 120.0,
            "reference": 600.0}
REFERENCE_KINDS = ("eager", "compiled")
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
        self._shapes_run: set[tuple] = set()
        self._worker = _take_worker(device, self.limits)
        self._call("load", task.id, self._worker.stage(build))
        # What the worker could set up around itself (namespaces, limits), for the judge to log.
        self.protections = self._worker.protections()

    @property
    def flags(self) -> dict[str, str]:
        """The worker's checks, asked last: a reply still queued after this one was forged."""
        flags = self._call("flags")
        with contextlib.suppress(queue.Empty):
            sequence, _, _ = self._worker.replies.get(timeout=0.05)
            flags["timing_channel"] = message("timing_channel", f"an extra reply to request {sequence} was queued")
        return flags

    def run(self, inputs: tuple, shape: dict, outputs: tuple, watch: bool = True) -> tuple:
        # The first call at a shape may compile (Triton specialises on sizes): it gets `compile` more.
        key = tuple(sorted(shape.items()))
        limit = self.limits["run"] + (0 if key in self._shapes_run else self.limits["compile"])
        self._shapes_run.add(key)
        got = self._worker.call("run", (inputs, shape, outputs, watch), limit)
        # Copies owned by the judge: the worker frees its memory, and cannot change them later.
        return tuple(t.clone() if isinstance(t, torch.Tensor) else t for t in (outputs if got is None else got))

    def time(self, shape: dict, seeds: list[int], output_specs: list, l2_bytes: int, budget_s: float) -> TimedRuns:
        timed = self._call("time", shape, seeds, output_specs, l2_bytes, budget_s)
        if not isinstance(timed, TimedRuns):  # the harness always sends one: something else answered
            detail = f"the timing reply was a {type(timed).__name__}"
            raise Flagged({"timing_channel": message("timing_channel", detail)})
        timed.outputs = [tuple(t.clone() for t in outputs) for outputs in timed.outputs]
        return timed

    def join(self, rank: int, memory) -> None:
        """A distributed task's rank: this worker's place in the group and the peers' memory (`sandbox.peers`)."""
        self._call("join", rank, memory)

    def close(self) -> None:
        self._worker.stop()

    def _call(self, op: str, *args):
        return self._worker.call(op, args, self.limits[op])


def time_reference_in_worker(device: Device, task: Task | str, shape: dict, kind: str, sets: int, l2_bytes: int,
                             budget_s: float, limits: dict[str, float] | None = None) -> TimeStats:
    """Time the task's reference (`kind` "eager", or "compiled": `torch.compile` of it) at `shape`, in a
    fresh worker that has loaded no submission and never will.

    The worker makes `sets` input sets from seeds of its own and times them with `graders.timing.time_calls`,
    the code that times submissions; this one request is its only one, and it is stopped afterwards.
    Raises `SubmissionError` (`SubmissionTimeout` past `limits["reference"]`) when that fails.
    """
    if kind not in REFERENCE_KINDS:
        raise ValueError(f"kind must be one of {', '.join(REFERENCE_KINDS)}, not {kind!r}")
    limits = {**LIMITS_S, **(limits or {})}
    # No spare is started while the reference is timed: its start-up (a CUDA context, a Triton
    # kernel) would share the GPU with the timed calls. One is started once this worker is done.
    worker = _take_worker(device, limits, replace=False)
    try:
        task_id = task if isinstance(task, str) else task.id
        stats = worker.call("time_reference", (task_id, dict(shape), kind, sets, l2_bytes, budget_s),
                            limits["reference"])
    finally:
        worker.stop()
        with contextlib.suppress(Exception):  # a worker that cannot start fails again, and says why, when taken
            _start_spare(device, limits)
    if not isinstance(stats, TimeStats):  # the op always sends one
        raise SubmissionError(f"the reference timing reply was a {type(stats).__name__}")
    return stats


class _Worker:
    def __init__(self, device: Device, limits: dict | None = None):
        ctx = mp.get_context("spawn")
        self.scratch = Path(tempfile.mkdtemp(prefix=f"kerneldojo-worker-{os.getpid()}-"))
        limits = limits or {}
        self.cgroup = isolation.Cgroup(int(limits.get("memory", isolation.MEMORY_CAP_BYTES)),
                                       int(limits.get("processes", isolation.PROCESSES_CAP)))
        control, worker_control = ctx.Pipe()
        self.handle = isolation.WorkerHandle(control)
        plan = isolation.plan(self.scratch, device.mode == "gpu", worker_control, self.cgroup)
        # Replies travel over a pipe, not a queue: a queue's put starts a feeder thread in the worker,
        # which the threads-left-running check would have to tell apart from the submission's.
        self.requests, (receiving, sending) = ctx.Queue(), ctx.Pipe(duplex=False)
        self.replies = _PipeReplies(receiving, sending)
        self.sequence = 0
        device_spec = str(device.torch_device) if device.mode == "gpu" else "cpu"
        self.process = ctx.Process(
            target=_worker_main, args=(self.requests, self.replies, device_spec, str(self.scratch)),
            kwargs={"plan": plan}, daemon=True,
        )
        _spawner.submit(self.process.start).result()
        worker_control.close()

    def stage(self, build: Build) -> Build:
        """Copy the build into the scratch folder: the worker sees neither the build cache nor other builds."""
        folder = self.scratch / "build"
        folder.mkdir(exist_ok=True)
        source = folder / build.source_path.name
        if build.source_path.exists():
            shutil.copyfile(build.source_path, source)
        libraries = {}
        for dtype, library in build.libraries.items():
            (folder / dtype).mkdir(exist_ok=True)
            libraries[dtype] = shutil.copyfile(library, folder / dtype / library.name)
        return dataclasses.replace(build, source_path=source, libraries=libraries)

    def protections(self) -> dict:
        return self.handle.protections()

    def call(self, op: str, args: tuple, limit_s: float):
        self.sequence += 1
        self.requests.put((self.sequence, op, args))
        deadline = time.monotonic() + limit_s
        while True:
            try:
                sequence, kind, payload = self.replies.get(timeout=0.1)
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
        if sequence != self.sequence:  # a second reply to an earlier request: someone else wrote one
            detail = f"a reply to request {sequence} came while request {self.sequence} ({op}) was pending"
            raise Flagged({"timing_channel": message("timing_channel", detail)})
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
        cgroup = getattr(self, "cgroup", None)  # the docker backend shares this method, not the cgroup
        notes = "".join(f"\n{note}" for note in cgroup.notes()) if cgroup is not None else ""
        tail = self.output_tail().strip()
        return notes + (f"\nlast output of the submission:\n{tail[-OUTPUT_TAIL_CHARS:]}" if tail else "")

    def stop(self) -> None:
        self._kill()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def _kill(self) -> None:
        # Single use: no graceful exit to wait for. The worker is pid 1 of its own pid namespace
        # where the kernel allows one (killing it ends everything inside), and is in a cgroup where
        # one could be made; the process group catches the rest.
        self.handle.kill(self.process.is_alive())
        self.cgroup.kill()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        # Reap it off the critical path; the exit code is read only after a death or a timeout.
        threading.Thread(target=self._reap, daemon=True).start()

    def _reap(self) -> None:
        self.process.join(10)
        self.handle.close()
        self.cgroup.remove()


# Workers are forked from this one thread, which lives as long as the judge: a worker's parent-death
# signal (isolation._die_with_parent) follows the *thread* that forked it, so a worker started from a
# GPU pool's slot thread, or an RL framework's short-lived thread, would be killed when that thread ends.
_spawner = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kerneldojo-spawner")

# One spare worker per device, started ahead so that its start-up is off the step's critical path.
_spares: dict[tuple, _Worker] = {}
_spares_lock = threading.Lock()  # the GPU pool takes workers from several threads


def _take_worker(device: Device, limits: dict | None = None, replace: bool = True) -> _Worker:
    """The spare worker for this device and these limits (or a new one); with `replace`, a new spare starts."""
    key, limits = _spare_key(device, limits)
    with _spares_lock:
        worker = _spares.pop(key, None)
        if worker is None or not worker.process.is_alive():
            worker = _Worker(device, limits)
        if replace:
            _spares[key] = _Worker(device, limits)
    return worker


def _start_spare(device: Device, limits: dict | None = None) -> None:
    """Start a spare worker for this device and these limits, unless a live one is waiting."""
    key, limits = _spare_key(device, limits)
    with _spares_lock:
        spare = _spares.get(key)
        if spare is None or not spare.process.is_alive():
            _spares[key] = _Worker(device, limits)


def _spare_key(device: Device, limits: dict | None) -> tuple[tuple, dict]:
    limits = {k: v for k, v in (limits or {}).items() if k in ("memory", "processes")}
    return (str(device.torch_device), tuple(sorted(limits.items()))), limits


@atexit.register
def _stop_spares() -> None:
    """At the judge's exit: spare workers and their cgroups go too (runs before multiprocessing's own)."""
    with _spares_lock:
        spares = list(_spares.values())
        _spares.clear()
    for worker in spares:
        with contextlib.suppress(Exception):
            worker.stop()
            worker.process.join(5)
            worker.cgroup.remove(attempts=20)


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


# ---------------------------------------------------------------------------------------------
# Inside the worker.


def _worker_main(requests, replies, device_spec: str, scratch: str, outputs_by_value: bool = False,
                 plan: isolation.Plan | None = None) -> None:
    """The request loop. `requests.get()` / `replies.put()`: queues here, a socket in `sandbox.docker`.

    With `outputs_by_value` (no shared memory with the judge), native entry points' outputs are sent back too.
    """
    _harden(Path(scratch), plan)
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
    # Sending a CPU tensor starts multiprocessing's descriptor-sharing thread; start it now, so that
    # the threads-left-running check counts it as the harness's, not the submission's.
    resource_sharer.DupFd(os.open(os.devnull, os.O_RDONLY))

    solution, last = None, None
    while True:
        sequence, op, args = requests.get()
        if op == "exit":
            return
        reply_to = functools.partial(_reply, replies, sequence)
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
                # Plain tensors only: a subclass would run its own code in the judge (flagged in `solution`).
                reply = None if solution.build.libraries and not outputs_by_value else tuple(
                    t.as_subclass(torch.Tensor) if isinstance(t, torch.Tensor) else t for t in last)
            elif op == "time":
                last = reply = solution.time(*args)  # its tensors too stay alive until the next request
            elif op == "flags":
                reply = dict(solution.flags)
            elif op == "join":
                solution.join(*args)
                reply = None
            elif op == "time_reference":
                if solution is not None:  # a clean process only: nothing a submission left behind slows it
                    raise SubmissionError("time_reference is answered only by a worker that has loaded no submission")
                reply = _time_reference(device_spec, *args)
            reply_to("ok", reply)
        except CompileError as e:
            reply_to("compile_error", str(e))
        except WrongOutput as e:
            reply_to("wrong", str(e))
        except SubmissionError as e:
            reply_to("runtime_error", str(e))
        except Exception as e:  # a CUDA fault at the synchronize, an unpicklable output, ...
            reply_to("runtime_error", f"{type(e).__name__}: {e}")
        sys.stdout.flush()


def _time_reference(device_spec: str, task_id: str, shape: dict, kind: str, sets: int, l2_bytes: int,
                    budget_s: float) -> TimeStats:
    """In a worker that has loaded no submission: time the reference as the harness times a submission."""
    from kerneldojo.tasks import get_task

    task = get_task(task_id)
    if kind == "eager":
        fn = None  # the reference itself
    elif kind == "compiled":
        import torch._inductor.config as inductor_config

        # Compile in this process: no pool of compile workers to fit under the worker's process and
        # memory limits; the kernels it makes are the same. Its caches are in the scratch folder
        # (TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR: `isolation._inside`). A precompiled header for
        # C++ (CPU) kernels is larger than the worker's file-size cap: none is made.
        inductor_config.compile_threads = 1
        with contextlib.suppress(AttributeError):  # a torch without the option
            inductor_config.cpp_cache_precompile_headers = False
        fn = torch.compile(task.reference.reference)
    else:
        raise SubmissionError(f"the reference kind must be one of {', '.join(REFERENCE_KINDS)}, not {kind!r}")
    device = torch.device(device_spec)
    calls = task.reference_calls(shape, device, sets, fn)
    if device.type != "cuda":
        raise SubmissionError(f"timing the reference needs a GPU (CUDA events); this worker runs on {device_spec}")
    return time_calls(calls, device, l2_bytes, budget_s=budget_s)


def _reply(replies, sequence: int, kind: str, payload) -> None:
    replies.put((sequence, kind, payload))


class _PipeReplies:
    """The queue interface (`put`, `get(timeout)`) over the two ends of a one-way pipe."""

    def __init__(self, receiving, sending):
        self.receiving, self.sending = receiving, sending

    def put(self, item) -> None:
        self.sending.send(item)

    def get(self, timeout: float):
        if not self.receiving.poll(timeout):
            raise queue.Empty
        return load_reply(self.receiving.recv_bytes())


# What a reply may contain: tensors (by shared memory or CUDA IPC), the result records, plain data.
# Plain `pickle.loads` would run any callable the worker names, inside the judge.
_REPLY_GLOBALS = {
    "torch.multiprocessing.reductions": {"rebuild_storage_fd", "rebuild_storage_filename", "rebuild_tensor",
                                         "rebuild_typed_storage", "rebuild_cuda_tensor", "rebuild_storage_empty",
                                         "rebuild_typed_storage_child"},
    "torch": {"Size", "Tensor", "device"},
    "torch.storage": {"UntypedStorage", "TypedStorage"},
    "multiprocessing.resource_sharer": {"DupFd"},
    "kerneldojo.result": {"TimeStats", "ProfileStats", "KernelRecord"},
    "kerneldojo.sandbox.runner": {"TimedRuns"},
    "builtins": {"set", "frozenset", "slice", "complex"},
    "collections": {"OrderedDict"},
}


class _ReplyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if name in _REPLY_GLOBALS.get(module, ()) or (module == "torch" and isinstance(getattr(torch, name, None),
                                                                                       torch.dtype)):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"a reply may not contain {module}.{name}")


def load_reply(data: bytes):
    """Unpickle a worker's reply, allowing only the globals a genuine reply uses."""
    try:
        return _ReplyUnpickler(io.BytesIO(data)).load()
    except pickle.UnpicklingError as e:
        raise Flagged({"timing_channel": message("timing_channel", str(e))}) from None


def _launch_trivial_triton_kernel(device_spec: str) -> None:
    from kerneldojo.sandbox.triton_interpreter import interpreter

    with interpreter(device_spec == "cpu"):
        import triton
        import triton.language as tl

        @triton.jit
        def fill(out_ptr, BLOCK: tl.constexpr):
            tl.store(out_ptr + tl.arange(0, BLOCK), tl.zeros([BLOCK], tl.float32))

        fill[(1,)](torch.empty(16, device=device_spec), BLOCK=16)


def _harden(scratch: Path, plan: isolation.Plan | None = None) -> dict:
    """Before any submission code runs: own process group, limits, namespaces, output to a file.

    With a `plan` (the process backend) the worker enters the namespaces and cgroup of
    `sandbox.isolation`; this process then forks, and only the worker returns from here. Without
    one (the docker backend, already boxed) it keeps to the process group, rlimits and no network.
    Returns what is active, by name.
    """
    os.setsid()
    if not scratch.is_dir():  # a spare stopped (the judge exited) before it started
        os._exit(0)
    os.chdir(scratch)
    for limit, value in ((resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, OUTPUT_CAP_BYTES),
                         (resource.RLIMIT_NOFILE, OPEN_FILES_CAP), (resource.RLIMIT_CPU, CPU_SECONDS_CAP)):
        hard = resource.getrlimit(limit)[1]
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(limit, (value, value))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the cap fails instead of killing

    def redirect_output() -> None:
        out = os.open(scratch / "output.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
        sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)

    if plan is not None:
        return isolation.enter(plan, redirect_output)
    redirect_output()
    # A new network namespace has only a downed loopback: no connection leaves. Needs privilege
    # (root, or user namespaces); without it the worker runs with the host's network.
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        os.environ["KERNELDOJO_NETWORK_ISOLATION"] = "unavailable"
        return {"network_namespace": "unavailable"}
    return {"network_namespace": True}
