"""The process backend, the judge's side: every submission runs in its own single-use worker process
(`sandbox.worker.loop`, which runs inside the sandbox; nothing in this file does).

The judge keeps what decides the score (seeds, inputs, reference outputs, the comparison, the
reference timings) and never imports the submission. A worker is spawned ahead of need (torch
imported), hardens itself (its own process group, rlimits, and where the kernel allows: user, pid,
mount, ipc and network namespaces, a read-only file system, cgroup limits, no capabilities; see
`sandbox.worker.confine`; output to a capped file in a private scratch folder), then loads one submission and
answers requests: run on these inputs, time these calls, report forbidden calls. A worker that never
loads a submission also times the task's reference (`time_reference_in_worker`), so that reference
and submission are timed by the same code in the same kind of clean process. Requests and replies
cross one socket (`sandbox.channel`): CPU tensors by value, CUDA tensors by IPC handle; the worker
gets no secret and no folder of the judge's. Each request has a wall-clock limit; past it, or
if the worker dies (a segfault, `os._exit`, a CUDA fault), the whole process group is killed and
the judge reports it. The worker is then discarded, so nothing it did reaches the next step.

What this does not stop is listed in docs/sandbox.md (threat model): among it GPU memory
exhaustion, and in GPU mode the judge's pid namespace is shared (CUDA IPC).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import dataclasses
import json
import math
import multiprocessing.popen_spawn_posix
import multiprocessing.spawn
import multiprocessing.util
import os
import pickle
import queue
import secrets
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.multiprocessing as mp

from kerneldojo.graders.checks import Flagged, message
from kerneldojo.graders.timing import MAX_RUNS
from kerneldojo.result import TimeStats, printable
from kerneldojo.tasks import Task, task_ref

from . import isolation
from .channel import Channel
from .device import Device
from .gpu_lock import GPULock
from .protocol import (
    FLAGS_CAP,
    LIMITS_S,
    MEMORY_CAP_BYTES,
    OUTPUT_TAIL_CHARS,
    PROCESSES_CAP,
    PROFILED_CALLS,
    PROGRESS,
    PROGRESS_CAP,
    REFERENCE_KINDS,
    Build,
    Retime,
    SubmissionError,
    SubmissionTimeout,
    TimedRuns,
    Unavailable,
    WorkerLost,
    WorkerNotReady,
    capped,
    read_regular_tail,
    reply_cap,
    timed_reply_sets,
    unwrap_reply,
)  # fmt: skip
from .worker.environment import kept
from .worker.loop import serve_socket
from .worker.template import serve_template


class WorkerSolution:
    """A `protocol.SubmissionHandle` served by a worker process."""

    def __init__(self, task: Task, build: Build, device: Device, limits: dict[str, float] | None = None,
                 all_ready: threading.Barrier | None = None):
        """`all_ready`: a barrier the workers of a distributed step pass once each is ready, so that no rank's
        submission code runs while another rank's worker is still starting (red team round 80: one rank's code,
        seeing every GPU, could fill the next rank's memory and make its start fail, the machine's `skipped`)."""
        self.limits = {**LIMITS_S, **(limits or {})}
        self._gpu = device.mode == "gpu"  # every GPU timing reply carries a profile (`_implausible`)
        try:
            for attempt in range(2):  # a worker that could not start is the machine's doing: another gets a try
                self._worker = _take_worker(device, self.limits)
                try:
                    # What the worker could set up around itself (namespaces, limits), for the judge to log; it
                    # comes once the worker is set up, its READY after its warm-up.
                    protections = self._worker.protections(timeout=self.limits["load"])
                    self._worker.wait_ready(self.limits["load"])
                    break
                except WorkerNotReady:
                    if attempt:
                        raise
            if all_ready is not None:
                all_ready.wait(self.limits["load"])
        except BaseException as e:
            if all_ready is not None:
                all_ready.abort()
            if getattr(self, "_worker", None) is not None:
                self._worker.stop()
            if isinstance(e, threading.BrokenBarrierError):
                raise Unavailable("another rank's worker could not start: no rank loaded the submission") from None
            raise
        self._start(task, build, protections)

    def _start(self, task: Task, build: Build, protections: dict) -> None:
        """Every backend's, once its worker is set up: the processes its cgroup holds now are the worker's own, taken
        before any submission code runs; then the load."""
        self.protections = protections
        self.seen_flags: dict[str, str] = {}  # the checks the run replies carried, kept if the worker is lost
        self.load_s = 0.0  # what the worker says its load took (the judge clamps it to the wall time)
        self._shapes_run: set[tuple] = set()
        self._shapes_timed: set[tuple] = set()  # a shape's second timing may see no process appear (`Retime`)
        self._processes = self._cgroup_processes() if "worker" not in protections else None  # no report: unknown
        self._load(task, build)
        self._no_process_left("load")

    def _cgroup_processes(self) -> frozenset[int] | None:
        cgroup = getattr(self._worker, "cgroup", None)
        return cgroup.processes() if cgroup is not None else None

    def _no_process_left(self, request: str) -> None:
        """The judge's own look at the worker's cgroup after a request (the worker's account of its children can be
        forged): a process that was not there before the submission loaded outlived its code (red team round 45: a
        detached helper, a fresh Python with its own CUDA context, did the work no profile of the worker saw; round
        46: one started at import, with the worker's orphan adoption turned off, was in a baseline taken after the
        load)."""
        now = self._cgroup_processes()
        if self._processes is not None and now is not None and now - self._processes:
            detail = f"{len(now - self._processes)} process(es) in the worker's cgroup after its {request} that were " \
                     "not there before the submission loaded"
            self._worker.stop()  # they go with it: the cgroup is killed
            raise Flagged({"threads_left_running": message("threads_left_running", detail)})

    @contextlib.contextmanager
    def _watched(self, requests: str, strict: bool = True):
        """The judge's look at the worker's cgroup while `requests` run too (`isolation.RequestWatch`), yielded: a
        helper gone before they end is missing from the look after them (red team round 48). `strict`: a process
        found is flagged, whatever the requests did after the worker's kill; else it is let finish and noted in the
        watch's `found` (a first timing's compile: `protocol.Retime`)."""
        cgroup = getattr(self._worker, "cgroup", None)
        if cgroup is None or self._processes is None:
            yield None
            return
        watch = isolation.RequestWatch(cgroup, self._processes, kill=strict)
        try:
            with watch:
                yield watch
        finally:
            if watch.found and strict:
                self._worker.stop()
                detail = f"during its {requests}: {watch.found}"
                raise Flagged({"threads_left_running": message("threads_left_running", detail)})

    def _load(self, task: Task, build: Build) -> None:
        """The build's files travel inside the request (`protocol.dumps`): the worker sees no build cache."""
        try:
            load_s = self._call("load", task_ref(task), build)
            self.load_s = load_s if isinstance(load_s, float) and math.isfinite(load_s) else 0.0
        except BaseException:  # a submission that fails at import takes its worker with it
            self._worker.stop()
            raise

    @property
    def flags(self) -> dict[str, str]:
        """The worker's checks, asked last: a reply still queued after this one was forged."""
        flags = _checked_flags(self._call("flags"), "the flags reply")
        with contextlib.suppress(queue.Empty):
            self._worker.replies.get(timeout=0.05)
            flags["timing_channel"] = message("timing_channel", "an extra reply was queued after the last request")
        if self._worker.replies.error:  # the frame the channel refused after this reply: the worker's own, late
            flags["timing_channel"] = message("timing_channel", self._worker.replies.error)
        return flags

    def run(self, inputs: tuple, shape: dict, outputs: tuple, watch: bool = True) -> tuple:
        # The first call at a shape may compile (Triton specialises on sizes): it gets `compile` more.
        key = tuple(sorted(shape.items()))
        limit = self.limits["run"] + (0 if key in self._shapes_run else self.limits["compile"])
        self._shapes_run.add(key)
        specs = [(tuple(t.shape), t.dtype) for t in outputs]
        # The allowance ends with the JIT: once the worker says the first call returned (`protocol.PROGRESS`).
        reply = self._worker.call("run", (inputs, shape, outputs, watch), limit, reply_cap(_nbytes(specs)),
                                  after_progress_s=self.limits["run"])
        if not (isinstance(reply, tuple) and len(reply) == 2):
            detail = f"a run's reply was a {type(reply).__name__}, not its outputs and its checks"
            raise Flagged({"timing_channel": message("timing_channel", detail)})
        got, flags = reply
        self.seen_flags.update(_checked_flags(flags, "a run's checks"))
        self._no_process_left("run")
        return _owned(outputs if got is None else got, specs)

    def time(self, shape: dict, seeds: list[int], refills: list[int], profile_seeds: list[int], output_specs: list,
             l2_bytes: int, budget_s: float) -> TimedRuns:
        """Two requests: the timed calls, then, once their reply is in (and its outputs copied here: the worker frees
        them at its next request), the profiled calls on sets refilled from `profile_seeds`, sent only now."""
        sets, profiled = len(seeds), min(PROFILED_CALLS, len(seeds))
        first = (key := tuple(sorted(shape.items()))) not in self._shapes_timed
        self._shapes_timed.add(key)
        with self._watched("timing", strict=not first) as watch:
            timed = self._timing_reply("time", (shape, seeds, refills, output_specs, l2_bytes, budget_s), sets,
                                       output_specs)
            profile = self._timing_reply("profile", (profile_seeds[:profiled],), profiled, output_specs)
        joined = timed.joined(profile)
        self._no_process_left("timing")
        if problem := _implausible(joined, sets, self._gpu):  # a first timing's figures too: the judge may pay them
            raise Flagged({"timing_channel": message("timing_channel", problem)})
        if watch is not None and watch.found:
            raise Retime(watch.found, joined)
        return joined

    def _timing_reply(self, op: str, args: tuple, sets: int, output_specs: list) -> TimedRuns:
        reply = self._worker.call(op, args, self.limits["time"], reply_cap(sets * _nbytes(output_specs)))
        if not isinstance(reply, TimedRuns) or not isinstance(reply.outputs, list):  # something else answered
            detail = f"the {op} reply was a {type(reply).__name__}"
            raise Flagged({"timing_channel": message("timing_channel", detail)})
        if len(reply.outputs) != sets:
            detail = f"the {op} reply held {len(reply.outputs)} outputs for {sets} input sets"
            raise Flagged({"timing_channel": message("timing_channel", detail)})
        reply.outputs = [_owned(outputs, output_specs) for outputs in reply.outputs]
        return reply

    def ncu(self, shape: dict, output_specs: list, calls: int, limit_s: float) -> str:
        """Nsight Compute's CSV of a replay of one case (`harness.Solution.ncu`): feedback, parsed by the judge."""
        return self._call("ncu", shape, output_specs, calls, limit_s)

    def join(self, rank: int, memory) -> None:
        """A distributed task's rank: this worker's place in the group and the peers' memory (`sandbox.peers`)."""
        self._call("join", rank, memory)

    def close(self) -> None:
        self._worker.stop()

    def _call(self, op: str, *args):
        return self._worker.call(op, args, self.limits[op])


def _implausible(timed: TimedRuns, sets: int, gpu: bool) -> str | None:
    """Why the worker's figures cannot be measurements (a NaN compares false with every bound the judge checks,
    and an own share above 1 pays more than all the work; on a GPU, no profile, which the harness always takes
    there: a reply without one skipped every check of the profile), or why its `sets` input sets cannot all be
    rechecked (the judge rechecks the outputs the reply holds, so a reply without them would skip it: each profiled
    set and at least one timed set must be there, `protocol.timed_reply_sets`), or None."""
    if gpu and timed.profile is None:
        return "the worker sent no profile of its timed calls"
    expected, profiled = timed_reply_sets(sets), timed.outputs[sets:]
    if not (len(timed.outputs) == expected and any(o is not None for o in timed.outputs[:sets])
            and all(o is not None for o in profiled)):
        return (f"the worker reported {len(timed.outputs)} outputs for the {sets} input sets it was given "
                f"(expected {expected}, the timed ones and the profiled ones, all run)")
    for record in (timed.stats, timed.profile):
        for name, value in getattr(record, "__dict__", {}).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and not (
                    math.isfinite(value) and value >= 0):
                return f"the worker reported {type(record).__name__}.{name} = {value!r}"
    share = getattr(timed.profile, "own_share", None)
    if share is not None and not (isinstance(share, float) and 0 <= share <= 1):
        return f"the worker reported an own share of {share!r}"
    runs = getattr(timed.stats, "runs", None)
    if not (isinstance(runs, int) and 1 <= runs <= MAX_RUNS):  # the judge's seed accounting indexes by it (round 39)
        return f"the worker reported {runs!r} timed runs (the harness makes 1 to {MAX_RUNS})"
    return None


def _nbytes(specs: list) -> int:
    return sum(math.prod(shape) * dtype.itemsize for shape, dtype in specs)


def _checked_flags(flags, what: str) -> dict[str, str]:
    """A worker's checks as the judge keeps them (names and messages capped); a reply of another kind was forged."""
    if not (isinstance(flags, dict) and all(isinstance(k, str) for k in flags)):
        raise Flagged({"timing_channel": message("timing_channel", f"{what} was a {type(flags).__name__}")})
    return {printable(name[:100]): capped(text) for name, text in list(flags.items())[:FLAGS_CAP]}


def _owned(got, specs: list) -> tuple:
    """Copies owned by the judge (the worker frees its memory and cannot change them later), made only of
    outputs shaped as expected: anything else goes uncopied to the comparison, which rejects it."""
    if not isinstance(got, (tuple, list)):
        return got
    return tuple(t.clone() if isinstance(t, torch.Tensor) and i < len(specs) and (tuple(t.shape), t.dtype) ==
                 (tuple(specs[i][0]), specs[i][1]) else t for i, t in enumerate(got))  # fmt: skip


def time_reference_in_worker(device: Device, task: Task | str, shape: dict, kind: str, sets: int, l2_bytes: int,
                             budget_s: float, limits: dict[str, float] | None = None, gpu: GPULock | None = None
                             ) -> TimeStats:  # fmt: skip
    """Time the task's reference (`kind` "eager", or "compiled": `torch.compile` of it) at `shape`, in a
    fresh worker that has loaded no submission and never will.

    The worker makes `sets` input sets from seeds of its own, calls each once (torch.compile's compile: a minute
    on a cold cache) while `gpu` is held shared, then times them with `graders.timing.time_calls`, the code that
    times submissions, while it is held alone; these are its only requests, and it is stopped afterwards.
    Raises `SubmissionError` (`SubmissionTimeout` past `limits["time_reference"]`, both requests together) when
    that fails.
    """
    if kind not in REFERENCE_KINDS:
        raise ValueError(f"kind must be one of {', '.join(REFERENCE_KINDS)}, not {kind!r}")
    limits = {**LIMITS_S, **(limits or {})}
    gpu = gpu or GPULock()
    deadline = time.monotonic() + limits["time_reference"]
    # No spare is started while the reference is timed: its start-up (a CUDA context, a Triton
    # kernel) would share the GPU with the timed calls. One is started once this worker is done.
    worker = _take_worker(device, limits, replace=False)
    try:
        task_id = task if isinstance(task, str) else task_ref(task)
        with gpu.shared(long=True):  # torch.compile: up to minutes
            worker.call("prepare_reference", (task_id, dict(shape), kind, sets), max(deadline - time.monotonic(), 1.0))
        with gpu.exclusive():
            stats = worker.call("time_reference", (l2_bytes, budget_s), max(deadline - time.monotonic(), 1.0))
    finally:
        worker.stop()
        with contextlib.suppress(Exception):  # a worker that cannot start fails again, and says why, when taken
            _start_spare(device, limits)
    if not isinstance(stats, TimeStats):  # the op always sends one
        raise SubmissionError(f"the reference timing reply was a {type(stats).__name__}")
    return stats


def evidence_in_worker(device: Device, task: Task, build: Build, shape: dict, seeds: list[int], output_specs: list,
                       limits: dict[str, float] | None = None, sample: tuple[int, int] | None = None,
                       worker: _Worker | None = None) -> dict:
    """Nsight Compute's record of a replay of `build` at `shape`, one call per seed, gathered by a fresh worker that
    never loads the submission (`worker.evidence_replay`): {"csv", "outputs", "problems", "returncode"}, or
    {"unavailable": why} / {"timeout": why}; and "limits_hit", the judge's own notes of what the worker's cgroup
    stopped. With `sample` (count, seed), each output comes back as `count` of its elements
    (`protocol.sample_positions`). `graders.evidence` reads it; nothing here trusts it. `worker`: an armed one
    (`take_armed_replay`), whose replay waits under ncu; else a spare starts its replay itself."""
    limits = {**LIMITS_S, **(limits or {})}
    started = time.monotonic()
    worker = worker or _take_worker(device, limits)
    took = time.monotonic() - started
    try:
        sent = output_specs if sample is None else [((min(math.prod(size), sample[0]),), dtype)
                                                     for size, dtype in output_specs]
        cap = reply_cap(len(seeds) * _nbytes(sent) + (4 << 20))  # the outputs and ncu's capped CSV
        reply = worker.call("evidence", (task_ref(task), build, dict(shape), list(seeds), output_specs,
                                         limits["evidence"] - 10, sample), limits["evidence"], cap)
        notes = worker.cgroup.notes()  # the judge's own word on what the worker's limits stopped
    finally:
        worker.stop()
    if not isinstance(reply, dict):
        raise SubmissionError(f"the evidence reply was a {type(reply).__name__}")
    return {**reply, "limits_hit": notes, "take_s": took, "worker_s": time.monotonic() - started - took}


# A worker starts with the allowlisted environment (`worker.environment.kept`) at exec, so that none of the judge's
# secrets ever enters its memory: `scrub()` in the worker clears os.environ, but CPython's start-up copies of the
# environment stay, freed, in the heap that the sandbox forks from (red team round 9). multiprocessing's spawn
# execs Python with the judge's environment and has no way to pass another; while this thread starts a worker, its
# exec goes through `env -i NAME=VALUE... python ...` instead (the same process: env execs Python in place), and
# the child re-runs neither the judge's main module nor sees its command line.
# The judge's os.environ is never changed (other threads read it), and every other spawn is left as it was.
_launching = threading.local()
_spawnv_passfds = multiprocessing.util.spawnv_passfds
ENV = shutil.which("env", path="/usr/bin:/bin") or "/usr/bin/env"


def _spawnv_allowlisted(path: str, args: list[str], passfds) -> int:
    environment = getattr(_launching, "environment", None)
    if environment is None:
        return _spawnv_passfds(path, args, passfds)
    command = [ENV, "-i", *(f"{k}={v}" for k, v in environment.items()), path, *args[1:]]
    return _spawnv_passfds(os.fsencode(ENV), command, passfds)  # multiprocessing's executable is bytes


_preparation_data = multiprocessing.spawn.get_preparation_data


def _preparation_without_the_judges(name: str) -> dict:
    """What a spawned child learns of its parent, less the judge's main module (spawn re-runs it in the child: a
    service's start-up script, its constants) and command line (a token passed as an argument) for a worker,
    whose target and arguments are importable from kerneldojo alone."""
    data = _preparation_data(name)
    if getattr(_launching, "environment", None) is not None:
        for key in ("init_main_from_name", "init_main_from_path", "sys_argv"):
            data.pop(key, None)
    return data


multiprocessing.util.spawnv_passfds = _spawnv_allowlisted
multiprocessing.spawn.get_preparation_data = _preparation_without_the_judges


class _AllowlistedProcess(mp.get_context("spawn").Process):
    @staticmethod
    def _Popen(process_obj):
        _launching.environment = kept(dict(os.environ))
        try:
            return multiprocessing.popen_spawn_posix.Popen(process_obj)
        finally:
            _launching.environment = None


class _Worker:
    def __init__(self, device: Device, limits: dict | None = None):
        ctx = mp.get_context("spawn")
        isolation.undumpable_judge()
        isolation.keep_judge_oom_score()
        self.scratch = Path(tempfile.mkdtemp(prefix=f"kerneldojo-worker-{os.getpid()}-"))
        limits = limits or {}
        self.cgroup = isolation.Cgroup(int(limits.get("memory", MEMORY_CAP_BYTES)),
                                       int(limits.get("processes", PROCESSES_CAP)))
        control, worker_control = ctx.Pipe()
        self.handle = isolation.WorkerHandle(control)
        plan = isolation.plan(self.scratch, device.mode == "gpu", worker_control, self.cgroup,
                              int(limits.get("scratch", isolation.SCRATCH_CAP_BYTES)))
        judge_end, worker_end = socket.socketpair()
        self.requests = self.replies = Channel(judge_end, device.torch_device, cuda_ipc=device.mode == "gpu")
        self.sequence = 0
        self.prep: dict | None = None  # an armed evidence replay's case, as the judge drew it
        device_spec = str(device.torch_device) if device.mode == "gpu" else "cpu"
        self.process = _spawner.submit(_start_worker, device_spec, str(self.scratch), plan, worker_end,
                                       worker_control).result()
        worker_control.close()
        worker_end.close()

    def protections(self, timeout: float = 5.0) -> dict:
        return self.handle.protections(timeout)

    def call(self, op: str, args: tuple, limit_s: float, max_reply_bytes: int | None = None,
             after_progress_s: float | None = None):
        """Send a request; its reply, read within `limit_s` and `max_reply_bytes` whatever the worker does.
        With `after_progress_s`, up to PROGRESS_CAP progress frames may come first, each shortening the deadline
        to at most `after_progress_s` from its arrival (`protocol.PROGRESS`); any other is a forgery."""
        # A request's number is drawn, not counted: a reply written before the request was sent cannot carry it
        # (red team round 71: the `flags` reply queued ahead with the next number, then the worker gone).
        self.sequence = secrets.randbits(62)
        self.requests.put((self.sequence, op, args), max_reply_bytes)
        deadline = time.monotonic() + limit_s
        progress_left, after = (PROGRESS_CAP if after_progress_s is not None else 0), ""
        while True:
            try:
                reply = self.replies.get(timeout=0.1)
                if isinstance(reply, tuple) and len(reply) == 3 and reply[1] == PROGRESS:
                    if progress_left <= 0 or reply[0] != self.sequence:
                        detail = f"a progress frame ({reply[0]}) that request {self.sequence} ({op}) allowed no more of"
                        raise Flagged({"timing_channel": message("timing_channel", detail)})
                    progress_left -= 1
                    if time.monotonic() + after_progress_s < deadline:  # only ever shorter
                        deadline, limit_s = time.monotonic() + after_progress_s, after_progress_s
                        after = " after its first call returned (Triton's JIT done)"
                    continue
                break
            except queue.Empty:
                if self.replies.closed.is_set() or not self.process.is_alive():
                    self._let_it_end()
                    self._kill()
                    ready = self._was_ready()
                    tail = self._tail_note()
                    self.stop()
                    how = self.replies.error or f"the worker process died ({_describe_exit(self.process.exitcode)})"
                    if self.replies.forged:  # a second reply, or one before its request: only a forger sends it
                        raise Flagged({"timing_channel": message("timing_channel", f"{how} during {op}")}) from None
                    if self._killed_from_outside():
                        raise WorkerLost(f"{how} during {op}{tail}") from None
                    if not ready:
                        raise WorkerNotReady(f"{how} before it was ready for {op}, before any submission code ran in "
                                             f"it: the machine's failure (GPU or host memory, a kill from outside), "
                                             f"not the submission's{tail}") from None
                    raise SubmissionError(f"{how} during {op}{tail}") from None
                if time.monotonic() > deadline:
                    self._kill()
                    ready = self._was_ready()
                    tail = self._tail_note()
                    self.stop()
                    if not ready:
                        raise WorkerNotReady(f"the worker was not ready for {op} within its {limit_s:g} s limit "
                                             f"(a loaded machine), before any submission code ran; it was killed{tail}"
                                             ) from None
                    # Its memory, not its time, ended it (a loaded machine's reclaim can hold the kill past the
                    # limit). A container's limits are docker's (`docker._ContainerCgroup` has no such count).
                    oom_killed = getattr(getattr(self, "cgroup", None), "oom_killed", None)
                    if oom_killed is not None and oom_killed():
                        raise SubmissionError(f"{op} ran out of host memory{tail}") from None
                    if self._killed_from_outside():
                        raise WorkerLost(f"{op} was ended by the OOM killer{tail}") from None
                    raise SubmissionTimeout(f"{op} ran past its {limit_s:g} s limit{after}; the worker was killed{tail}"
                                            ) from None
        if not (isinstance(reply, tuple) and len(reply) == 3):
            raise Flagged({"timing_channel": message("timing_channel", f"a reply of the form {type(reply).__name__}")})
        sequence, kind, payload = reply
        if sequence != self.sequence:  # a second reply to an earlier request: someone else wrote one
            detail = f"a reply to request {sequence} came while request {self.sequence} ({op}) was pending"
            raise Flagged({"timing_channel": message("timing_channel", detail)})
        return unwrap_reply(kind, payload)

    def _killed_from_outside(self) -> bool:
        outside = getattr(getattr(self, "cgroup", None), "oom_killed_from_outside", None)  # docker's has none
        return outside is not None and outside()

    def output_tail(self) -> str:
        """The end of what the submission printed (a file the worker could replace: `read_regular_tail`)."""
        return printable(read_regular_tail(self.scratch / "output.txt", OUTPUT_TAIL_CHARS))

    def _tail_note(self) -> str:
        cgroup = getattr(self, "cgroup", None)  # the docker backend shares this method, not the cgroup
        notes = "".join(f"\n{note}" for note in cgroup.notes()) if cgroup is not None else ""
        tail = self.output_tail().strip()
        return notes + (f"\nlast output of the submission:\n{tail[-OUTPUT_TAIL_CHARS:]}" if tail else "")

    def stop(self) -> None:
        self._kill()
        self.replies.close()
        remove_tree(self.scratch)

    def wait_ready(self, limit_s: float) -> None:
        """Until the worker's READY, before any request: a worker that dies or stays silent first, READY sent or not,
        ran no submission code (the load request brings it), so that is `WorkerNotReady`, the machine's."""
        deadline = time.monotonic() + limit_s
        while not self.replies.ready.wait(0.1):
            if self.replies.closed.is_set() or not self.process.is_alive() or time.monotonic() > deadline:
                self._let_it_end()
                self.stop()
                raise WorkerNotReady(f"the worker did not become ready within {limit_s:g} s "
                                     f"({_describe_exit(self.process.exitcode)}), before any submission code ran "
                                     "in it: the machine's failure (GPU or host memory, a kill from outside)")

    def _was_ready(self) -> bool:
        """Did the killed worker send its READY (`protocol.READY`)? Its frames are read to its end first: a
        submission that crashed at once must not pass for a worker that never started."""
        self.replies.closed.wait(2.0)
        return self.replies.ready.is_set()

    def _let_it_end(self) -> None:
        """A worker that died has ended by now (a container, which takes seconds more: `docker._Container`)."""

    def _kill(self) -> None:
        # Single use: no graceful exit to wait for. The worker is pid 1 of its own pid namespace
        # where the kernel allows one (killing it ends everything inside), and is in a cgroup where
        # one could be made; the process group catches the rest.
        alive = self.process.is_alive()
        self.handle.kill(alive)
        self.cgroup.kill()
        # Only while it lives: once reaped (a template reaps its workers within 50 ms), its pid may be another
        # worker's, which leads a group of its own (red team round 105, reasoned).
        if alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
        # Reap it off the critical path; the exit code is read only after a death or a timeout.
        threading.Thread(target=self._reap, daemon=True).start()

    def _reap(self) -> None:
        self.process.join(10)
        self.handle.close()
        self.cgroup.remove()
        isolation.keep_judge_oom_score()


def _start_worker(device_spec: str, scratch: str, plan: isolation.Plan, worker_end: socket.socket, worker_control):
    """A worker process, forked by the template where one runs (`worker.template`: its imports done once), else
    spawned; on the spawner thread."""
    if TEMPLATE:
        try:
            return _template().fork(device_spec, scratch, plan, worker_end, worker_control)
        except TemplateUnavailable:
            pass  # spawned, as without a template; the next worker starts another
    process = _AllowlistedProcess(target=serve_socket, args=(worker_end, device_spec, scratch), kwargs={"plan": plan},
                                  daemon=True)
    # No secret of the judge's goes along: multiprocessing's authkey opens the judge's own listeners.
    process.authkey = secrets.token_bytes(32)
    process.start()
    return process


# Workers come from a template process where KERNELDOJO_WORKER_TEMPLATE is not 0 (the default): a fork of a process
# that has imported torch, Triton and kerneldojo starts a worker in a fraction of a fresh interpreter's time.
TEMPLATE = os.environ.get("KERNELDOJO_WORKER_TEMPLATE", "1") != "0"
TEMPLATE_READY_S = 180.0  # its imports, on a loaded machine; a fork once it is ready takes milliseconds
TEMPLATE_FORK_S = 20.0
_templates: list[_Template] = []  # the live one last


class TemplateUnavailable(Exception):
    pass


class _Template:
    """The judge's end of the worker template (`worker.template`): fork requests out, the forked pids (each with a
    pidfd the template opened before it could reap the child) and exit statuses back, over a SOCK_SEQPACKET pair."""

    def __init__(self):
        self.owner = os.getpid()
        self.sock, template_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.process = _AllowlistedProcess(target=serve_template, args=(template_end,), daemon=True)
        self.process.authkey = secrets.token_bytes(32)
        self.process.start()
        template_end.close()
        self.ready, self.closed = threading.Event(), threading.Event()
        self.retired = False  # a fork request gave up on it: no more requests go to it
        self._forked: queue.Queue[_ForkedProcess | None] = queue.Queue()
        self._children: dict[int, _ForkedProcess] = {}
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True, name="kerneldojo-template").start()

    def fork(self, device_spec: str, scratch: str, plan: isolation.Plan, worker_end: socket.socket, worker_control
             ) -> _ForkedProcess:  # fmt: skip
        request = pickle.dumps(("fork", device_spec, scratch, dataclasses.replace(plan, control=None)))
        try:
            socket.send_fds(self.sock, [request], [worker_end.fileno(), worker_control.fileno()])
            child = self._forked.get(timeout=TEMPLATE_FORK_S if self.ready.is_set() else TEMPLATE_READY_S)
        except (OSError, queue.Empty):
            child = None
        if child is None:
            # Retired, not killed: the workers it forked run on (and die with it only at the judge's exit); a late
            # reply to this request is read and dropped (red team round 108: a kill here ended every step in flight).
            with self._lock:
                self.retired, idle = True, not self._children
            with contextlib.suppress(queue.Empty):  # a fork the reader queued before it knew (red team round 109)
                while True:
                    if (late := self._forked.get_nowait()) is not None:
                        late.kill()
            if idle:
                self.stop()
            raise TemplateUnavailable("the worker template did not fork a worker")
        return child

    def _read(self) -> None:
        """Its messages, in order: an exit is always read after the fork that made that pid."""
        try:
            while True:
                message, fds, _, _ = socket.recv_fds(self.sock, 1024, 1)
                if not message:
                    break
                kind, pid, *rest = json.loads(message)
                if kind == "ready":
                    self.ready.set()
                elif kind == "failed":
                    self._forked.put(None)
                elif kind == "forked" and fds:
                    child = _ForkedProcess(pid, fds[0])
                    with self._lock:
                        self._children[pid] = child
                        late = self.retired
                    if late:  # the request gave up on it: not a worker of anyone's
                        child.kill()
                    else:
                        self._forked.put(child)
                elif kind == "exit":
                    with self._lock:
                        child = self._children.pop(pid, None)
                        done = self.retired and not self._children
                    if child is not None:
                        child.ended(rest[0])
                    if done:  # a retired template goes once its last worker has
                        self.stop()
        except (OSError, ValueError):
            pass
        finally:
            self.closed.set()
            self._forked.put(None)
            with self._lock:
                lost, self._children = list(self._children.values()), {}
            for child in lost:  # killed with it (their parent-death signal)
                child.ended(None)

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(ProcessLookupError, PermissionError, AttributeError, ValueError):
            os.kill(self.process.pid, signal.SIGKILL)
        threading.Thread(target=self.process.join, args=(10,), daemon=True).start()


def _template() -> _Template:
    """The live template, started here on its first use (on the spawner thread: its parent-death signal follows the
    thread that started it)."""
    live = _templates[-1] if _templates else None
    # A judge forked from another (a server's worker processes) has neither its reader thread nor its own channel.
    if live is None or live.owner != os.getpid() or live.retired or live.closed.is_set() or \
            not live.process.is_alive():
        _templates.append(_Template())
    return _templates[-1]


class _ForkedProcess:
    """A worker the template forked, as the judge sees it: alive until its pidfd says it ended; its exit status from
    the template, which reaps it (None if the template went first: then it was killed with it)."""

    def __init__(self, pid: int, pidfd: int):
        self.pid, self._pidfd = pid, pidfd
        self._status: int | None = None
        self._ended = threading.Event()

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)

    def ended(self, status: int | None) -> None:
        self._status = status
        self._ended.set()

    def is_alive(self) -> bool:
        if self._ended.is_set():
            return False
        poll = select.poll()  # not select(): a busy judge's descriptors pass FD_SETSIZE
        poll.register(self._pidfd, select.POLLIN)
        return not poll.poll(0)  # readable once it has ended

    @property
    def exitcode(self) -> int | None:
        if self.is_alive():
            return None
        self._ended.wait(1.0)  # the template's report follows its reap
        status = self._status
        if status is None:
            return -signal.SIGKILL
        return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)

    def join(self, timeout: float | None = None) -> None:
        if self._ended.wait(timeout):
            with contextlib.suppress(OSError):
                os.close(self._pidfd)
            self._pidfd = -1


# Workers are forked from this one thread, which lives as long as the judge: a worker's parent-death
# signal (isolation._die_with_parent) follows the *thread* that forked it, so a worker started from a
# GPU pool's slot thread, or an RL framework's short-lived thread, would be killed when that thread ends.
_spawner = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kerneldojo-spawner")

# Spare workers per device, started ahead so that their start-up (importing torch and Triton, the CUDA
# context: seconds) is off the step's critical path. A step can take less time than a worker takes to
# start, so one spare is not enough for back-to-back steps: the oldest (the likeliest warm) is taken and
# the queue topped up. A start costs seconds of CPU (torch and torch._dynamo imports ~5 s of a loaded 2-core CPU,
# `baselines/bench/bench_worker_start.py`), so where there are cores more spares start at once and each has had
# more steps' time to warm when taken: half the cores, 2 to 8. KERNELDOJO_SPARE_WORKERS sets how many (each
# holds a CUDA context, ~0.5 GB, on a GPU).
SPARE_WORKERS = max(1, int(os.environ.get("KERNELDOJO_SPARE_WORKERS", min(8, max(2, (os.cpu_count() or 2) // 2)))))
_spares: dict[tuple, list[_Worker]] = {}
_spares_lock = threading.Lock()  # the GPU pool takes workers from several threads


def _take_worker(device: Device, limits: dict | None = None, replace: bool = True) -> _Worker:
    """The oldest live spare worker for this device and these limits (or a new one); with `replace`, the
    spares are topped up."""
    key, limits = _spare_key(device, limits)
    with _spares_lock:
        queue_ = _spares.setdefault(key, [])
        queue_[:] = [w for w in queue_ if w.process.is_alive()]
        worker = queue_.pop(0) if queue_ else _Worker(device, limits)
        if replace:
            _top_up(queue_, device, limits)
    return worker


def _start_spare(device: Device, limits: dict | None = None) -> None:
    """Top up the spare workers for this device and these limits."""
    key, limits = _spare_key(device, limits)
    with _spares_lock:
        queue_ = _spares.setdefault(key, [])
        queue_[:] = [w for w in queue_ if w.process.is_alive()]
        _top_up(queue_, device, limits)


# A worker's CUDA context took 610-658 MiB of an H200 (2026-11-27): eight judges on one GPU, each with its spares and
# armed replays, filled its memory and workers died at their start. A spare starts only while the GPU keeps
# SPARE_MIN_FREE_BYTES free (KERNELDOJO_SPARE_MIN_FREE_BYTES) beyond a context for each spare still starting; the
# worker a step needs now starts regardless.
SPARE_MIN_FREE_BYTES = int(os.environ.get("KERNELDOJO_SPARE_MIN_FREE_BYTES", 16 << 30))
CONTEXT_BYTES = 1 << 30


def _top_up(queue_: list[_Worker], device: Device, limits: dict) -> None:
    while len(queue_) < SPARE_WORKERS and _room_for_a_spare(device, queue_):
        queue_.append(_Worker(device, limits))


def _room_for_a_spare(device: Device, queue_: list[_Worker]) -> bool:
    if device.mode != "gpu":
        return True
    try:
        free, _ = torch.cuda.mem_get_info(device.torch_device)
    except Exception:  # no answer: the count alone decides, as before
        return True
    starting = sum(not w.replies.ready.is_set() for w in queue_)
    return free - starting * CONTEXT_BYTES >= SPARE_MIN_FREE_BYTES


# Workers whose evidence replay is already started under ncu and waiting for its spec (`evidence_replay.arm`):
# that start (a fresh Python, torch, the task library, a CUDA context, under ncu) was 10-17 s of a 17.5 s evidence
# pass on an H100 machine (2026-11-25, `bench_evidence_cost.py`). Armed in the background, ARMED_REPLAYS per task
# (KERNELDOJO_ARMED_REPLAYS), ARMED_TOTAL in all (each holds two CUDA contexts and every case's inputs while it
# waits; the tasks least recently asked for lose theirs first); used for nothing else.
ARMED_REPLAYS = max(0, int(os.environ.get("KERNELDOJO_ARMED_REPLAYS", 2)))
ARMED_TOTAL = 2 * ARMED_REPLAYS  # over every task and device of this judge process
_armed: dict[tuple, list[_Worker]] = {}
_arming: dict[tuple, int] = {}  # per key, armings under way
_closing = threading.Event()  # set at the judge's exit: an arming that ends later stops its worker


def arm_evidence_replays(device: Device, limits: dict | None = None, draw: Callable[[], dict] | None = None,
                         task_key: str | None = None) -> None:
    """Top up the armed evidence replays for this device and `task_key` (no-op on the CPU): a judge calls it when a
    step may need one, so that the replay is ready by the time the step's timing is done. `draw()`, run for each
    arming: what the replay prepares ({"task", "cases": [{"shape", "seeds", "outputs"}, ...]}: every bench case with
    the judge's seeds, kept here with the worker for `take_armed_replay`)."""
    if device.mode != "gpu" or ARMED_REPLAYS == 0 or _closing.is_set():
        return
    spare_key, limits = _spare_key(device, limits)
    key = (spare_key, task_key)
    with _spares_lock:
        queue_ = _armed.pop(key, [])
        _armed[key] = queue_  # the most recently asked for last: the others are dropped first
        queue_[:] = [w for w in queue_ if w.process.is_alive()]
        wanted = max(ARMED_REPLAYS - len(queue_) - _arming.get(key, 0), 0)
        dropped = []
        for other in list(_armed)[:-1]:  # a mixed batch keeps several tasks armed, ARMED_TOTAL workers at most
            while _armed[other] and sum(map(len, _armed.values())) + sum(_arming.values()) + wanted > ARMED_TOTAL:
                dropped.append(_armed[other].pop(0))
        for _ in range(wanted):
            _arming[key] = _arming.get(key, 0) + 1
            # A daemon: the judge's exit never waits for a worker's start (its worker dies with the judge).
            threading.Thread(target=_arm_one, args=(key, device, limits, draw), daemon=True).start()
    if dropped:  # off the step's path
        threading.Thread(target=_stop_all, args=(dropped,), daemon=True).start()


def _arm_one(key: tuple, device: Device, limits: dict, draw: Callable[[], dict] | None) -> None:
    worker = None
    try:
        prep = draw() if draw is not None else None
        worker = _Worker(device, limits)
        worker.call("arm_evidence", (prep,), LIMITS_S["load"])
        worker.prep = prep
        with _spares_lock:
            if not _closing.is_set() and key in _armed:
                _armed[key].append(worker)
                worker = None
    except Exception:  # a worker that cannot arm: the evidence pass starts its replay itself, and says what fails
        pass
    finally:
        with _spares_lock:
            _arming[key] -= 1
        if worker is not None:
            worker.stop()


def take_armed_replay(device: Device, limits: dict | None = None, task_key: str | None = None
                      ) -> tuple[_Worker | None, dict | None]:  # fmt: skip
    """The oldest armed worker for this device and task and what it prepared (the judge's seeds, as this process
    recorded them), or (None, None); for `evidence_in_worker(worker=...)`."""
    key = (_spare_key(device, limits)[0], task_key)
    with _spares_lock:
        queue_ = _armed.get(key, [])
        queue_[:] = [w for w in queue_ if w.process.is_alive()]
        worker = queue_.pop(0) if queue_ else None
    return worker, worker.prep if worker else None


def _spare_key(device: Device, limits: dict | None) -> tuple[tuple, dict]:
    limits = {k: v for k, v in (limits or {}).items() if k in ("memory", "processes", "scratch")}
    return (str(device.torch_device), tuple(sorted(limits.items()))), limits


@atexit.register
def _at_exit() -> None:
    """At the judge's exit: spare and armed workers and their cgroups go too (runs before multiprocessing's own),
    and an arming that ends later stops its own worker."""
    _closing.set()
    _stop_spares()
    for template in _templates:
        if template.owner == os.getpid():
            template.stop()


def _stop_spares() -> None:
    with _spares_lock:
        spares = [worker for pool in (_spares, _armed) for queue_ in pool.values() for worker in queue_]
        _spares.clear()
        _armed.clear()
    _stop_all(spares)


def _stop_all(workers: list[_Worker]) -> None:
    """Kill them all first, then wait for each: the exit waits for the slowest, not for the sum."""
    for worker in workers:
        with contextlib.suppress(Exception):
            worker.stop()
    for worker in workers:
        with contextlib.suppress(Exception):
            worker.process.join(5)
            worker.cgroup.remove(attempts=20)


def remove_tree(path: Path) -> None:
    """Remove a folder a worker wrote, however deep it made it (shutil.rmtree recurses once per level)."""
    try:
        shutil.rmtree(path, ignore_errors=True)
    except RecursionError:
        subprocess.run(["rm", "-rf", "--one-file-system", str(path)], timeout=120, check=False)


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"
