"""Anti-cheat checks. Each has a `name` (what `EvalResult.checks_fired` records) and a message that
says what was seen and what to do instead. A check that fires makes the status `flagged`.

Those that watch the submission from inside its worker (forbidden operators, tampering, threads,
the reference, memory) are trusted code loaded before the submission; the ones that need the whole
picture (same output, physical floor, the profile) run in the judge.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import threading
import time
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

MESSAGES = {
    "forbidden_op": "the submission called {detail}, which this task forbids; do the work in your own kernel",
    "reference_called": "the submission called the task's reference implementation; write the kernel yourself",
    "tampering": "the submission replaced {detail}, which the judge relies on; leave torch, time and the judge alone",
    "threads_left_running": "{detail} still running after the call returned; finish all work before returning",
    "not_a_tensor": "output {detail} is a torch.Tensor subclass; return plain tensors that hold the values",
    "excess_memory": "{detail}; this task forbids materialising intermediates that large",
    "same_output": "the outputs were identical for different inputs ({detail}); the result must depend on the inputs",
    "below_floor": "{detail} is under the physical floor for this work on this GPU; the timing cannot be real",
    "vendor_kernel": "library kernels ran ({detail}), which this task forbids; write the kernel yourself",
    "decoy_kernel": "{detail} of the GPU time was spent in kernels the submission did not compile",
    "unsynchronized_stream": "{detail}: work on another stream was not joined to the caller's stream before "
    "returning; make the caller's stream wait for it (an event, or synchronize)",
    "timing_channel": "{detail}; the worker's replies were out of order, as when a submission forges one",
}


def message(check: str, detail: str = "") -> str:
    return f"{check}: " + MESSAGES[check].format(detail=detail)


class ForbiddenOps(TorchDispatchMode):
    """Records calls to aten operators the task forbids (e.g. `aten.mm` in a GEMM task).

    Composite operators decompose before they reach the dispatcher, so `torch.matmul` shows up as
    `aten.mm`; tasks list the operators that do the work, not the Python spellings. An in-place
    variant counts as its operator: forbidding `aten.mul` forbids `x.mul_(y)` too.
    """

    name = "forbidden_op"

    def __init__(self, forbidden: list[str], called: list[str] | None = None):
        super().__init__()
        self.forbidden = frozenset(forbidden)
        self.called: list[str] = [] if called is None else called
        self.popped = False  # taken off the mode stack by someone else while active
        self._exiting = False

    def __exit__(self, *exc):
        self._exiting = True
        try:
            return super().__exit__(*exc)
        finally:
            self._exiting = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        op = f"aten.{func.overloadpacket.__name__}"
        if op.endswith("_") and not op.endswith("__"):  # in-place twins (mul_, exp_) do the same work
            op = op[:-1]
        if op in self.forbidden and op not in self.called:
            self.called.append(op)
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def watching(watch: ForbiddenOps):
    """`watch` active, and the two ways around it closed while it is: every thread that starts runs
    under a watch of its own recording into the same list (a dispatch mode is thread-local), and
    popping a watch off the mode stack (`_disable_current_modes`) is recorded in `watch.popped`."""
    from torch.utils import _python_dispatch

    bootstrap = threading.Thread._bootstrap_inner  # runs `run`, a subclass's override included
    pop_mode = _python_dispatch._pop_mode

    def watched(thread):
        with ForbiddenOps(list(watch.forbidden), watch.called):
            bootstrap(thread)

    def recorded_pop(*args, **kwargs):
        mode = pop_mode(*args, **kwargs)
        if isinstance(mode, ForbiddenOps) and not mode._exiting:
            watch.popped = True
        return mode

    threading.Thread._bootstrap_inner, _python_dispatch._pop_mode = watched, recorded_pop
    try:
        with watch:
            yield
    finally:
        threading.Thread._bootstrap_inner, _python_dispatch._pop_mode = bootstrap, pop_mode


def _guarded() -> dict[str, tuple[object, str]]:
    """What timing and checking rely on, by name: (owner, attribute)."""
    from kerneldojo.graders import correctness, profile, timing
    from kerneldojo.sandbox import runner

    owners = {
        "torch.cuda": (torch.cuda, ["synchronize", "current_stream", "Event", "Stream", "stream"]),
        "torch.cuda.Event": (torch.cuda.Event, ["record", "elapsed_time", "synchronize", "query"]),
        "torch.Tensor": (torch.Tensor, ["zero_", "copy_", "clone", "data_ptr", "__torch_function__"]),
        "torch": (torch, ["equal", "empty", "full_like"]),
        "torch.profiler": (torch.profiler, ["profile"]),
        "time": (time, ["perf_counter", "monotonic", "sleep"]),
        "threading": (threading, ["enumerate", "active_count"]),
        "kerneldojo.graders.timing": (timing, _own_callables(timing)),
        "kerneldojo.graders.timing.L2Flush": (timing.L2Flush, ["__init__", "__call__"]),
        "kerneldojo.graders.timing.HostGate": (timing.HostGate, ["__init__", "close", "open", "_launch"]),
        "kerneldojo.graders.profile": (profile, _own_callables(profile)),
        # The runner's own references to what it imported (patching the module it came from misses them).
        "kerneldojo.sandbox.runner": (runner, [n for n in vars(runner) if inspect.isfunction(getattr(runner, n))]),
        "kerneldojo.graders.correctness": (correctness, ["check_no_aliasing", "check_outputs"]),
        "Solution": (runner.Solution, ["run", "time", "_call_native", "_watched"]),
        "ForbiddenOps": (ForbiddenOps, ["__torch_dispatch__", "__enter__", "__exit__"]),
        "Tampering": (Tampering, ["changed"]),
    }
    return {f"{prefix}.{attr}": (owner, attr) for prefix, (owner, attrs) in owners.items() for attr in attrs}


def _own_callables(module) -> list[str]:
    return [n for n, v in vars(module).items() if callable(v) and getattr(v, "__module__", "") == module.__name__]


class Tampering:
    """Identity of every guarded function, taken before the submission loads; `changed()` lists the
    ones that are no longer the same object (a monkeypatched timer, synchronize or judge function)."""

    name = "tampering"

    def __init__(self):
        self._watch = _guarded()
        self._before = {name: _raw(owner, attr) for name, (owner, attr) in self._watch.items()}

    def changed(self) -> list[str]:
        return [name for name, (owner, attr) in self._watch.items() if _raw(owner, attr) is not self._before[name]]


def _raw(owner: object, attr: str) -> object:
    # The attribute as stored (not bound): a bound method is a new object on every access.
    for klass in (owner.__mro__ if isinstance(owner, type) else ()):
        if attr in vars(klass):
            return vars(klass)[attr]
    return getattr(owner, attr, None)


def live_threads() -> dict[int, str]:
    return {t.ident: t.name for t in threading.enumerate() if t.is_alive()}


def child_processes() -> list[int]:
    """This process's children that are still alive, as the kernel lists them."""
    pids: list[int] = []
    for task in Path(f"/proc/{os.getpid()}/task").glob("*/children"):
        try:
            pids += [int(p) for p in task.read_text().split()]
        except OSError:
            continue
    return [p for p in pids if not _is_zombie(p)]


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


class ReferenceTripwire:
    """While active, the task's `reference` (and `expected`, where defined) are functions that record
    being called."""

    name = "reference_called"
    GUARDED = ("reference", "expected")

    def __init__(self, module):
        self.module, self.called = module, False
        self.originals = {name: getattr(module, name) for name in self.GUARDED if hasattr(module, name)}
        self._tripwires = {name: self._wrap(fn) for name, fn in self.originals.items()}

    def _wrap(self, fn):
        def tripwire(*args, **kwargs):
            self.called = True
            return fn(*args, **kwargs)

        return tripwire

    def __enter__(self):
        for name, fn in self._tripwires.items():
            setattr(self.module, name, fn)
        return self

    def __exit__(self, *exc) -> None:
        for name, fn in self.originals.items():
            setattr(self.module, name, fn)


class Flagged(Exception):
    """An anti-cheat check fired; `checks` are their names."""

    def __init__(self, checks: dict[str, str]):
        super().__init__("\n".join(checks.values()))
        self.checks = checks
