"""The worker's request loop: the process that loads one submission, serves the judge's requests and
is then discarded. Everything here runs inside the sandbox, next to untrusted code.

It confines itself first (`harden`: its own process group, rlimits, output to a capped file, and with a
plan the namespaces and cgroup of `worker.confine`), warms up (imports, the CUDA context, Triton's
runtime) while no submission is waiting, then answers the ops of `sandbox.protocol`. A worker that
never loads a submission may also time the task's reference (`time_reference`), so that reference
and submission are timed by the same code in the same kind of clean process.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import signal
import socket
import sys
import time
from pathlib import Path

import torch

from kerneldojo.graders.timing import HostGate, L2Flush, time_calls
from kerneldojo.result import TimeStats
from kerneldojo.sandbox.device import resolve_device
from kerneldojo.sandbox.protocol import (
    FLAGS_CAP,
    MESSAGE_CAP_CHARS,
    OPS,
    PROGRESS,
    READY,
    REFERENCE_KINDS,
    REPLY_ERRORS,
    SubmissionError,
    reply_kind,
)
from kerneldojo.tasks import list_tasks, task_from_ref

from .channel import WorkerEnd
from .collective import compile_barrier
from .confine import Plan, enter, stage, stages_after
from .environment import scrub
from .harness import Solution, plain
from .syscall_filter import before_submission_code, refuse_processes_and_sockets
from .triton_interpreter import interpreter
from .watches import ForbiddenOps, interpreter_code, torch_at_start

OUTPUT_CAP_BYTES = 16 << 20
OPEN_FILES_CAP = 4096
CPU_SECONDS_CAP = 1800  # a backstop behind the wall-clock limits: CPU time summed over threads
CLONE_NEWNET = 0x40000000


def _reply(replies, sequence: int, kind: str, payload) -> None:
    replies.put((sequence, kind, payload))


def serve_socket(sock: socket.socket, device_spec: str, scratch: str, plan: Plan | None = None) -> None:
    """A process-backend worker: the request loop over its socket to the judge. On the GPU the judge's
    output tensors arrive by CUDA IPC and native entry points write into them; on the CPU they are copies."""
    end = WorkerEnd(sock, torch.device(device_spec), f"{scratch}/build", cuda_ipc=device_spec != "cpu")
    with contextlib.suppress(EOFError, BrokenPipeError, ConnectionResetError):  # the judge went away
        serve(end, end, device_spec, scratch, outputs_by_value=device_spec == "cpu", plan=plan)


def serve(requests, replies, device_spec: str, scratch: str, outputs_by_value: bool = False,
          plan: Plan | None = None) -> None:
    """The request loop: `requests.get()` / `replies.put()` (a `channel.WorkerEnd`).

    With `outputs_by_value` (no memory shared with the judge), native entry points' outputs are sent back too.
    """
    stage("imported")  # the interpreter and imports done (bench_worker_start.py)
    harden(Path(scratch), plan, keep_fds=tuple({e.sock.fileno() for e in (requests, replies) if hasattr(e, "sock")}))
    stage("warmup")
    if device_spec != "cpu":  # Triton launches, events and bare synchronize() use the current device
        torch.cuda.set_device(device_spec)
    # Warm up while no submission is waiting: imports, the task library, the CUDA context.
    list_tasks()
    stage("task_library")
    with ForbiddenOps(None):  # its first use imports torch._dynamo, over a second
        torch.empty(1, device=device_spec)
    stage("watch_and_context")
    with contextlib.suppress(Exception):  # Triton's runtime (launcher, interpreter) on a throwaway kernel
        _launch_trivial_triton_kernel(device_spec)
    stage("triton_launch")
    if device_spec != "cpu":
        try:
            _compile_harness_kernels(resolve_device(device_spec))
        except Exception as e:  # timing cannot work then, but correctness can; the timing request will say why
            print(f"kerneldojo worker: the harness's kernels did not compile: {type(e).__name__}: {e}", file=sys.stderr)
    stage("harness_kernels")
    torch_at_start()  # torch's operators and tensor types as registered before any submission's code runs
    stage("torch_at_start")
    if device_spec == "cpu":  # the interpreter's code, known before any submission's is loaded
        interpreter_code()
        syscall_filter = refuse_processes_and_sockets()
        if syscall_filter is not True:
            print(f"kerneldojo worker: no seccomp filter ({syscall_filter})", file=sys.stderr)
    stage("ready")
    if (warmup := stages_after("warmup")) is not None:  # bench_worker_start.py reads it from the output's tail
        print(f"kerneldojo worker stages: {json.dumps(warmup)}", file=sys.stderr, flush=True)
    session = _Session(device_spec, outputs_by_value, replies)
    _reply(replies, 0, READY, None)
    while True:
        # The last request's objects die before the next is read: a finalizer of the submission's on them would
        # otherwise run inside `requests.get()`, with the next request's number in this frame (red team round 72).
        args = None
        sequence, op, args = requests.get()
        session.sequence = sequence
        if op == "exit":
            return
        try:
            handler = getattr(session, f"op_{op}", None) if op in OPS else None
            if handler is None:
                raise SubmissionError(f"unknown request {op!r}")
            _reply(replies, sequence, "ok", handler(*args))
        except Exception as e:  # a CUDA fault at the synchronize, an unpicklable output, ...
            known = isinstance(e, (*REPLY_ERRORS.values(),))
            _reply(replies, sequence, reply_kind(e), str(e) if known else f"{type(e).__name__}: {e}")
        sys.stdout.flush()


class _Session:
    """One worker's state, and its answer to each request op of `sandbox.protocol.OPS` (`op_<name>`)."""

    def __init__(self, device_spec: str, outputs_by_value: bool, replies=None):
        self.device_spec, self.outputs_by_value, self.replies = device_spec, outputs_by_value, replies
        self.sequence = 0  # of the request being answered
        self.solution: Solution | None = None
        self.last = None  # the last reply's tensors, alive until the next request: the judge maps them via IPC
        self.reference_calls: list | None = None  # `prepare_reference`'s, for `time_reference`

    def op_load(self, task_id: str, build) -> float:
        """Returns the seconds the load took, for the judge's phase breakdown (the rest was the worker's start)."""
        started = time.perf_counter()
        before_submission_code()
        self.solution = Solution(task_from_ref(task_id), build, resolve_device(self.device_spec), self.outputs_by_value)
        if self.replies is not None:
            self.solution.first_return = lambda: _reply(self.replies, self.sequence, PROGRESS, None)
        return time.perf_counter() - started

    def op_run(self, inputs: tuple, shape: dict, outputs: tuple, watch: bool = True) -> tuple:
        """(outputs, the checks fired so far): the flags travel with every call's reply, so that a later hang or
        death, which loses the worker, cannot lose them (red team round 93: a flagged call, then a hang, was a
        timeout's 0 in place of a flag's -1)."""
        self.last = self.solution.run(inputs, shape, outputs, watch)
        if self.device_spec != "cpu":
            torch.cuda.synchronize()
        flags = {name: text[:MESSAGE_CAP_CHARS] for name, text in list(self.solution.flags.items())[:FLAGS_CAP]}
        # Native entry points wrote into the judge's own output tensors; nothing to send back.
        # Plain tensors only: a subclass would run its own code in the judge (flagged in `solution`).
        if self.solution.build.libraries and not self.outputs_by_value:
            return None, flags
        return plain(self.last), flags

    def op_time(self, *args):
        self.last = self.solution.timed(*args)
        return self.last

    def op_profile(self, *args):
        self.last = self.solution.profiled(*args)
        return self.last

    def op_ncu(self, *args) -> str:
        return self.solution.ncu(*args)

    def op_flags(self) -> dict[str, str]:
        return dict(self.solution.flags)

    def op_join(self, rank: int, memory) -> None:
        self.solution.join(rank, memory)

    def op_evidence(self, *args) -> dict:
        """Nsight Compute on a replay of the submission in a child (`evidence_replay.gather`): this process never
        loads it, so nothing that reads ncu's output here is submission code."""
        if self.solution is not None:
            raise SubmissionError("evidence is gathered only by a worker that has loaded no submission")
        from .evidence_replay import gather

        return gather(*args, device=self.device_spec)

    def op_prepare_reference(self, *args) -> None:
        if self.solution is not None:  # a clean process only: nothing a submission left behind slows it
            raise SubmissionError("prepare_reference is answered only by a worker that has loaded no submission")
        self.reference_calls = _reference_calls(self.device_spec, *args)

    def op_arm_evidence(self, prep: dict | None = None) -> None:
        """Start this worker's evidence replay under ncu ahead of its spec (`evidence_replay.arm`)."""
        if self.solution is not None or self.device_spec == "cpu":
            raise SubmissionError("arm_evidence is answered only by a GPU worker that has loaded no submission")
        from .evidence_replay import arm

        arm(self.device_spec, prep)

    def op_time_reference(self, l2_bytes: int, budget_s: float) -> TimeStats:
        if self.reference_calls is None:
            raise SubmissionError("time_reference needs prepare_reference first")
        return time_calls(self.reference_calls, torch.device(self.device_spec), l2_bytes, budget_s=budget_s)


def _reference_calls(device_spec: str, task_id: str, shape: dict, kind: str, sets: int) -> list:
    """In a worker that has loaded no submission: the reference's calls on `sets` input sets, each called once
    (torch.compile's compile and autotuning happen here, outside the timing's exclusive hold of the GPU)."""
    task = task_from_ref(task_id)
    if kind == "eager":
        fn = None  # the reference itself
    elif kind == "compiled":
        import torch._inductor.config as inductor_config

        # Compile in this process: no pool of compile workers to fit under the worker's process and
        # memory limits; the kernels it makes are the same. Its caches are in the scratch folder
        # (TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR: `confine._inside`). A precompiled header for
        # C++ (CPU) kernels is larger than the worker's file-size cap: none is made.
        inductor_config.compile_threads = 1
        with contextlib.suppress(AttributeError):  # a torch without the option
            inductor_config.cpp_cache_precompile_headers = False
        fn = torch.compile(task.reference.reference)
    else:
        raise SubmissionError(f"the reference kind must be one of {', '.join(REFERENCE_KINDS)}, not {kind!r}")
    device = torch.device(device_spec)
    if device.type != "cuda":
        raise SubmissionError(f"timing the reference needs a GPU (CUDA events); this worker runs on {device_spec}")
    calls = task.reference_calls(shape, device, sets, fn)
    for call in calls:
        call()
    torch.cuda.synchronize(device)
    return calls


def _compile_harness_kernels(device) -> None:
    """The harness's own Triton kernels (`graders.profile.HARNESS_KERNELS`), compiled at the worker's start: compiled
    at their first use, inside the timing requests, their ptxas was a process in the worker there, where the judge
    flags any (red team round 52)."""
    HostGate(device.torch_device)  # compiles on construction
    L2Flush(device.torch_device, device.l2_bytes)()  # the size the judge's requests give: the same specialisation
    compile_barrier(device.torch_device)
    torch.cuda.synchronize(device.torch_device)
    torch.cuda.empty_cache()  # the flush's buffer (twice the L2) is not kept by an idle spare


def _launch_trivial_triton_kernel(device_spec: str) -> None:
    with interpreter(device_spec == "cpu"):
        import triton
        import triton.language as tl

        @triton.jit
        def fill(out_ptr, BLOCK: tl.constexpr):
            tl.store(out_ptr + tl.arange(0, BLOCK), tl.zeros([BLOCK], tl.float32))

        fill[(1,)](torch.empty(16, device=device_spec), BLOCK=16)


def _drop_resource_tracker() -> None:
    """spawn hands every child the write end of the judge's multiprocessing resource tracker, a judge-side
    process that buffers what it reads and unlinks what it is told to: close it before any submission
    code runs (a worker that needs a tracker starts its own, inside the sandbox)."""
    from multiprocessing import resource_tracker

    tracker = resource_tracker._resource_tracker
    if getattr(tracker, "_fd", None) is not None:
        with contextlib.suppress(OSError):
            os.close(tracker._fd)
        tracker._fd, tracker._pid = None, None


def harden(scratch: Path, plan: Plan | None = None, keep_fds: tuple[int, ...] = ()) -> dict:
    """Before any submission code runs: own process group, limits, namespaces, output to a file.

    With a `plan` (the process backend) the worker enters the namespaces and cgroup of
    `worker.confine`; this process then forks, and only the worker returns from here. Without
    one (the docker backend, already boxed) it keeps to the process group, rlimits and no network.
    Returns what is active, by name.
    """
    os.setsid()
    scrub()  # before any fork: the sandbox's processes inherit the scrubbed environment
    # No input of the judge's: spawn hands the worker the judge's fd 0 (a pipe it reads, or the operator's terminal).
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    _drop_resource_tracker()
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
        return enter(plan, redirect_output, keep_fds)  # every other fd is closed (the spawn sentinel too)
    redirect_output()
    # A new network namespace has only a downed loopback: no connection leaves. Needs privilege
    # (root, or user namespaces); without it the worker runs with the host's network.
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        os.environ["KERNELDOJO_NETWORK_ISOLATION"] = "unavailable"
        return {"network_namespace": "unavailable"}
    return {"network_namespace": True}
