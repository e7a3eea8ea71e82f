"""Load a built submission and call it. This is the only code that executes submission code.

It runs inside a single-use worker (`sandbox.worker.loop`, started by `sandbox.process` or
`sandbox.docker`) or, with isolation="none", in the judge's own process: that backend runs worker
code in the judge by design (for debugging and for trusted code; nothing is contained).
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import inspect
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
import types
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor

from kerneldojo.graders.checks import message
from kerneldojo.graders.correctness import check_inputs_unchanged, check_no_aliasing, poisoned_like
from kerneldojo.graders.profile import (
    OwnKernels,
    inspected_kernel_names,
    native_kernel_names,
    profile_calls,
    summarize_profile,
    triton_kernel_names,
)
from kerneldojo.graders.timing import time_calls
from kerneldojo.sandbox.device import Device
from kerneldojo.sandbox.protocol import PLAIN_DATA, PROFILED_CALLS, Build, CompileError, SubmissionError, TimedRuns
from kerneldojo.tasks import Task, case_label
from kerneldojo.tasks.spec import STRIDE_PARAM

from .collective import join
from .triton_interpreter import interpreter
from .watches import (
    ForbiddenOps,
    ReferenceTripwire,
    Tampering,
    adopt_orphans,
    adopts_orphans,
    child_processes,
    live_threads,
    mode_depths,
    modes_left,
    module_functions,
    no_submission_hooks,
    reachable_bindings,
    watching,
)

_module_ids = itertools.count()
COLLECTIVE_RUNS = 40  # a distributed task's ranks make the same calls: a fixed count, not a target error


def _tensor_subclass(t: object) -> bool:
    return issubclass(type(t), torch.Tensor) and type(t) is not Tensor  # type(), never isinstance: no code of theirs


def plain(result: tuple) -> tuple:
    """Outputs as a reply holds them: plain tensors, made with no code of the submission's running (a subclass's
    `__torch_function__` would run as the reply is encoded, after every check: red team round 19), plain data as it
    is (the judge finds it wrong, naming its type; the encoder refuses what it holds that is not plain), and None
    for any other object. The checks flag subclasses (`_inspect`)."""
    with torch._C.DisableTorchFunctionSubclass():
        return tuple(t if type(t) is Tensor or type(t) in PLAIN_DATA else t.as_subclass(Tensor)
                     if _tensor_subclass(t) else None for t in result)


def guarded_here() -> dict[str, tuple[object, list[str]]]:
    """What the tampering watch guards in this module: the harness's own references to what it imported
    (patching the module they came from misses these) and its methods."""
    module = sys.modules[__name__]
    guard = {"kerneldojo.sandbox.worker.harness": (module, module_functions(module)),
             "Solution": (Solution, ["run", "time", "timed", "profiled", "_call_native", "_watched"])}
    # And the request loop that answers the judge with what these return, where this process runs one (red team
    # round 15: a wrapped `_Session.op_time` halved the figures after `Solution.time` had returned them).
    if loop := sys.modules.get("kerneldojo.sandbox.worker.loop"):
        guard["kerneldojo.sandbox.worker.loop"] = (loop, module_functions(loop))
        guard["_Session"] = (loop._Session, [n for n in vars(loop._Session) if n.startswith("op_")])
    if channel := sys.modules.get("kerneldojo.sandbox.worker.channel"):
        guard["WorkerEnd"] = (channel.WorkerEnd, ["get", "put"])
    return guard


def harness_kernels() -> dict[str, Callable[[], object]]:
    """The harness's own Triton kernels, each as the call the harness gets it by, and Triton's knobs (its launch
    hooks), guarded whole (`watches.ObjectState`): the profile leaves the kernels' launches out by name, so a launch of
    theirs that ran other code hid its work there (red team rounds 104, 105)."""
    from triton import knobs
    from triton.runtime import jit

    from kerneldojo.graders import timing

    from . import collective

    guarded: dict[str, Callable[[], object]] = {
        "the L2 flush's kernel": timing._flush_kernel, "the host gate's kernel": timing._gate_kernel,
        "the ranks' alignment kernel": collective._barrier_kernel}
    for name, knob in vars(knobs).items():  # runtime (launch hooks), compilation, cache, ...: the objects, not types
        if type(knob).__module__ == knobs.__name__ and not isinstance(knob, type):
            guarded[f"triton.knobs.{name}"] = functools.partial(getattr, knobs, name)
    # Every launch asks the active driver for the device and stream (round 106: its `get_current_device` replaced).
    guarded["triton's driver, as JITFunction.run finds it"] = functools.partial(getattr, jit, "driver")
    return guarded


def _reference_dependencies(module) -> dict[str, tuple[object, list[str]]]:
    """What the refills run: the task's `make_inputs` and the torch functions and tensor methods its module's code
    names (a task's own, or an adapted problem's `get_inputs`). The harness refills timed input sets outside the
    window, with no other watch on: a replaced `make_inputs` (red team round 21), or a torch function it calls, would
    run the submission's code there, off the clock."""
    names, codes = set(), [getattr(module, name).__code__ for name in module_functions(module)]
    while codes:
        code = codes.pop()
        names |= set(code.co_names)
        codes += [c for c in code.co_consts if inspect.iscode(c)]
    guard = {"the task's make_inputs": (module, ["make_inputs"]), **reachable_bindings(module.make_inputs, "refills")}
    for label, owner in (("torch", torch), ("torch.Tensor", torch.Tensor), ("torch.Generator", torch.Generator)):
        attrs = sorted(n for n in names if callable(getattr(owner, n, None)))
        guard[f"{label}, as the task's make_inputs uses it"] = (owner, attrs)
    return guard


class Solution:
    """A loaded submission, in this process (a `protocol.SubmissionHandle`): `run(inputs, shape, outputs)`
    returns its output tensors as a tuple.

    `outputs` are judge-allocated, poisoned tensors; native (cuda/cute) entry points write into
    them, Python submissions return their own. Checked runs (`watch=True`) are watched by the
    anti-cheat checks that live here; what they see collects in `flags` (check name -> message).
    """

    def __init__(self, task: Task, build: Build, device: Device, inputs_copied: bool = False):
        self.task, self.build, self.device = task, build, device
        # Inputs that crossed by value are this process's copies, which the judge never sees again: the
        # rule that a submission leaves its inputs alone is then checked here (the judge checks shared ones).
        self.inputs_copied = inputs_copied
        self.flags: dict[str, str] = {}
        # A distributed task's rank (`join`): the group passed to solution(), the harness's barrier.
        self.rank: int | None = None
        self.group = None
        self._align: Callable[[], None] | None = None
        self._shapes_called: set[str] = set()
        # Called once per shape when a checked call has returned on the host, before the device is synchronized:
        # the worker tells the judge (`protocol.PROGRESS`) that the JIT allowance may end.
        self.first_return: Callable[[], None] | None = None
        self._shapes_returned: set[str] = set()
        self._module_name: str | None = None
        # Taken before any submission code runs: what is alive and which functions are the real ones.
        self._forbidden = ForbiddenOps(task.allowed_ops)
        # The refills' inputs come from this function as it is now (red team round 21: a `make_inputs` replaced in
        # the reference module computed each set's answer at its refill, off the clock); replacing it is tampering.
        self._make_inputs = task.reference.make_inputs
        self._tampering = Tampering({**guarded_here(), **_reference_dependencies(task.reference)}, harness_kernels())
        # Before any submission code: a detached grandchild stays a child, seen after each call.
        self._adopting = adopt_orphans()
        self._threads, self._children = live_threads(), set(child_processes())
        self._modes = mode_depths()
        self._modes_left = False  # a mode found active between timed calls (`time`)
        self._tripwire = ReferenceTripwire(task.reference)
        # The kernels that count as its own, named before any of its code runs: the worker's copy of the source
        # and its libraries are files the submission could rewrite later (red team round 12).
        self._own_names = self._own_kernel_names()
        self._built_here: dict[str, frozenset[str]] = {}  # a library load_inline built -> its kernels (cuobjdump)
        # Where a library built at its run can be: this worker's scratch (its working folder and HOME now, before
        # any of its code) and the temporary folders it may write (round 89: a planted module named a CUDA
        # toolkit's library; round 90: an honest load_inline built in /var/tmp was not its own).
        self._writable = tuple({os.path.realpath(p) for p in (os.getcwd(), tempfile.gettempdir(), "/tmp", "/var/tmp",
                                                               "/dev/shm")})
        # and where it cannot be: the installation and every folder on the path now (a PYTHONPATH folder under /tmp,
        # a checkout's virtual environment as the working folder of an in-process judge)
        self._installed = tuple({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix,
                                                                *sys.path) if p} - set(self._writable))
        if build.language in ("triton", "python"):
            with self._tripwire:
                self._fn = self._import_python()
        else:
            self._entries = {dtype: self._load_native(lib) for dtype, lib in build.libraries.items()}
        self._inspect(())

    @property
    def forbidden_called(self) -> list[str]:
        """Forbidden operators seen in checked runs (not timed ones, where the watcher would cost time)."""
        return self._forbidden.called

    def run(self, inputs: tuple[torch.Tensor, ...], shape: dict, outputs: tuple[torch.Tensor, ...], watch=True):
        if watch:
            return self._watched(inputs, shape, outputs)
        if self.build.language in ("triton", "python"):
            try:
                with interpreter(self.device.mode == "cpu"):
                    result = self._fn(*inputs, *self.task.scalars(shape), *([self.group] if self.group else []))
            except Exception as e:
                # Triton compiles a kernel at its first launch: its errors are compile errors.
                if type(e).__name__ == "CompilationError" or isinstance(e.__cause__, SyntaxError):
                    raise CompileError(self._format_triton_compile_error(e)) from None
                if "PassManager::run failed" in str(e):  # Triton's MLIR pipeline crashed on this kernel
                    raise CompileError(f"Triton's compiler failed on this kernel:\n{self._format(e)}") from None
                raise SubmissionError(self._format(e)) from None
            result = tuple(result) if isinstance(result, tuple) else (result,)  # a plain tuple, iterated here
            # Here, not in the judge: across a process boundary the judge sees copies, never views.
            check_no_aliasing(result, inputs, case_label(shape))
            return result
        self._call_native(inputs, shape, outputs)
        return outputs

    def _watched(self, inputs: tuple, shape: dict, outputs: tuple) -> tuple:
        gpu = self.device.mode == "gpu"
        pristine = tuple(t.clone() for t in inputs) if self.inputs_copied else inputs
        if gpu:
            torch.cuda.synchronize(self.device.torch_device)
            torch.cuda.reset_peak_memory_stats(self.device.torch_device)
            allocated = torch.cuda.memory_allocated(self.device.torch_device)
        try:
            with watching(self._forbidden), self._tripwire:
                result = self.run(inputs, shape, outputs, watch=False)
            if self.first_return is not None and case_label(shape) not in self._shapes_returned:
                self._shapes_returned.add(case_label(shape))
                self.first_return()
        except Exception:
            # What the watches saw explains the failure better than the failure does. Threads left
            # behind are not counted: a call that raised may not have joined its own.
            self._inspect((), threads=False)
            raise
        check_inputs_unchanged(pristine, inputs, case_label(shape))
        if gpu:
            torch.cuda.synchronize(self.device.torch_device)
            # A shape's first call may autotune (Triton's benchmark allocates a cache-flush buffer):
            # memory counts from its second call on, and every checked shape is called more than once.
            if case_label(shape) in self._shapes_called:
                self._check_memory(shape, result, torch.cuda.max_memory_allocated(self.device.torch_device) - allocated)
            self._shapes_called.add(case_label(shape))
            self._own_kernels()  # its cuobjdump, a child process, runs here: none belongs in the timing requests
        self._inspect(result)
        return result

    def _inspect(self, result: tuple, threads: bool = True) -> None:
        """The checks that look at the process after submission code ran."""
        found = {}
        if self._forbidden.called:
            found["forbidden_op"] = ", ".join(self._forbidden.called)
        if self._tripwire.called:
            found["reference_called"] = ""
        changed = self._tampering.changed() + ["the forbidden-operator watch (popped)"] * self._forbidden.popped
        if self._modes_left or modes_left(self._modes):
            changed.append("the torch dispatch or function mode stack or the trace hook (one left active after a call)")
        if self._adopting and not adopts_orphans():
            changed.append("the worker's adoption of orphaned processes (PR_SET_CHILD_SUBREAPER turned off)")
        if changed:
            found["tampering"] = ", ".join(changed)
        left = [name for ident, name in live_threads().items() if ident not in self._threads] if threads else []
        children = set(child_processes()) - self._children if threads else set()
        if left or children:
            found["threads_left_running"] = " and ".join(
                f"{len(these)} {what}{'s' * (len(these) > 1)} ({', '.join(map(str, sorted(these)))})"
                for these, what in ((left, "thread"), (children, "child process")) if these)
        subclasses = [str(i) for i, t in enumerate(result) if _tensor_subclass(t)]
        if subclasses:
            found["not_a_tensor"] = ", ".join(subclasses)
        for check, detail in found.items():
            self.flags.setdefault(check, message(check, detail))

    def _check_memory(self, shape: dict, result: tuple, peak_bytes: int) -> None:
        """Only memory torch allocates is seen: Python submissions' buffers, not a native cudaMalloc."""
        limit = getattr(self.task.reference, "max_scratch_bytes", None)
        if limit is None or self.build.libraries:
            return
        scratch = peak_bytes - sum(t.nbytes for t in result if isinstance(t, torch.Tensor))
        if scratch > limit(shape):
            detail = (f"one call allocated {scratch / 2**20:.1f} MiB besides its outputs, over this case's "
                      f"{limit(shape) / 2**20:.1f} MiB")
            self.flags.setdefault("excess_memory", message("excess_memory", detail))

    def join(self, rank: int, memory) -> None:
        """Become rank `rank` of a distributed task: solution() gets a `PeerGroup` after its inputs."""
        self.rank = rank
        self._peer_memory = memory  # in CPU mode its tensors are the peers' mappings: they must stay alive
        self.group, self._align = join(rank, memory, self.device.torch_device)

    def time(self, shape: dict, seeds: list[int], refills: list[int], profile_seeds: list[int],
             output_specs: list[tuple], l2_bytes: int, budget_s: float) -> TimedRuns:
        """`timed`, then `profiled` (what a worker does in two requests, here in one process)."""
        return self.timed(shape, seeds, refills, output_specs, l2_bytes, budget_s).joined(self.profiled(profile_seeds))

    def timed(self, shape: dict, seeds: list[int], refills: list[int], output_specs: list[tuple], l2_bytes: int,
              budget_s: float) -> TimedRuns:
        """Time calls over a pool of input sets, one per seed; a set that comes round again first gets new
        content (the next of the judge's `refills` seeds, same memory), so no result can be reused by pointer or
        by content. The judge knows which seed each set held last (`protocol.last_seeds`): none is reported. The
        sets stay for `profiled`.

        A distributed task's rank times its slice of each set, a fixed number of runs: all ranks get the same
        seeds and make the same calls, each of which meets the other ranks'."""
        device, make_all = self.device.torch_device, self._make_inputs
        rank = self.rank

        def make(shape: dict, seed: int, device) -> tuple:
            inputs = make_all(shape, seed, device)
            return inputs if rank is None else tuple(t[rank].clone() for t in inputs)

        sets = [make(shape, seed, device) for seed in seeds]
        drawn = iter(refills)
        templates = tuple(torch.empty(size, dtype=dtype, device=device) for size, dtype in output_specs)
        out_sets = [poisoned_like(templates) for _ in seeds]
        last: list[tuple | None] = [None] * len(seeds)

        def call(k: int) -> None:
            last[k] = self.run(sets[k], shape, out_sets[k], watch=False)

        def refill(k: int, seed: int | None = None) -> None:
            self._modes_left = self._modes_left or modes_left(self._modes)
            seed = next(drawn) if seed is None else seed
            with no_submission_hooks():
                for tensor, fresh in zip(sets[k], make(shape, seed, device)):
                    tensor.copy_(fresh)
                out_sets[k] = poisoned_like(templates)

        def prepare(i: int) -> None:
            if i >= len(sets):
                refill(i % len(sets))

        calls = [functools.partial(call, k) for k in range(len(sets))]
        fixed = {} if rank is None else {"min_runs": COLLECTIVE_RUNS, "max_runs": COLLECTIVE_RUNS}
        stats = time_calls(calls, device, l2_bytes, budget_s=budget_s, prepare=prepare, before_start=self._align,
                           **fixed)
        timed_last = list(last)  # what the paid calls left, before any refill
        self._timed_sets = (stats, calls, refill, last, device, l2_bytes)
        self._inspect(tuple(t for out in timed_last if out is not None for t in out))
        return TimedRuns(stats, None, [None if out is None else plain(out) for out in timed_last])

    def profiled(self, seeds: list[int]) -> TimedRuns:
        """Profile one call on each of up to PROFILED_CALLS of `timed`'s sets, each refilled from `seeds`, which the
        judge sends only once the timed calls are done (red team round 44: sent ahead, the profiled calls' answers
        were computed in the timed calls, hidden from the events, and the profiled calls did no work to see)."""
        if getattr(self, "_timed_sets", None) is None:
            raise SubmissionError("`profile` asked before `time`")
        stats, calls, refill, last, device, l2_bytes = self._timed_sets
        self._timed_sets = None  # one profile per timing
        profile_started = time.perf_counter()
        profiled = min(PROFILED_CALLS, len(calls), len(seeds))
        for k in range(profiled):
            refill(k, seeds[k])
            last[k] = None
        kernels = profile_calls(calls[:profiled], device, l2_bytes, before=self._align)
        profile = summarize_profile(kernels, profiled, self._own_kernels())
        outputs = last[:profiled]
        self._inspect(tuple(t for out in outputs if out is not None for t in out))
        replied = [None if out is None else plain(out) for out in outputs]
        return TimedRuns(stats, profile, replied, time.perf_counter() - profile_started)

    def _own_kernel_names(self) -> OwnKernels:
        own = OwnKernels(triton=triton_kernel_names(self.build.source_path.read_text())
                         if self.build.language in ("triton", "python") else set())
        if self.device.mode != "gpu":  # no profile to read them in (and no cuobjdump on a CPU machine, maybe)
            return own
        # The judge's builds: the language's libraries and load_inline extensions built ahead, confined (their
        # kernels were counted foreign here while the evidence pass counted them own: decoy_kernel on an honest
        # KernelBench ModelNew, H200, 2026-11-27).
        for library in (*self.build.libraries.values(), *self.build.extensions.values()):
            own.native |= native_kernel_names(library)
        return own

    def _own_kernels(self) -> OwnKernels:
        own = OwnKernels(set(self._own_names.triton), set(self._own_names.native))
        if self.device.mode != "gpu":  # no profile to count them in (`_own_kernel_names`)
            return own
        for library in _extensions_built_here(self._writable, self._installed):  # load_inline's (KernelBench's)
            if library not in self._built_here:
                self._built_here[library] = inspected_kernel_names(library)
            own.native |= self._built_here[library]
        return own

    def ncu(self, shape: dict, output_specs: list, calls: int, limit_s: float) -> str:
        """Nsight Compute's CSV for `calls` calls at `shape`, from a replay in a child process (so under this
        worker's confinement; ncu needs the GPU's performance counters open to non-admin users). Feedback
        only: the judge parses it and never scores it. Raises SubmissionError when ncu cannot run."""
        from kerneldojo.graders.ncu import find_ncu, ncu_command

        ncu = find_ncu()
        if ncu is None:
            raise SubmissionError("no profile: ncu (Nsight Compute) not found on PATH or in the CUDA toolkit")
        folder = Path(tempfile.mkdtemp(prefix="ncu-"))
        spec = {"task": self.task.id, "device": str(self.device.torch_device), **self.build.paths(), "shape": shape,
                "seed": 0, "calls": calls,
                "outputs": [[list(size), str(dtype).removeprefix("torch.")] for size, dtype in output_specs]}
        (folder / "spec.json").write_text(json.dumps(spec))
        target = [sys.executable, "-m", "kerneldojo.sandbox.worker.ncu_replay", str(folder / "spec.json")]
        command = ncu_command(ncu, target, from_start=False)
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=limit_s, cwd=folder)
        except subprocess.TimeoutExpired:
            raise SubmissionError(f"no profile: the Nsight Compute replay ran past {limit_s:.0f} s") from None
        if done.returncode != 0 and '"Kernel Name"' not in done.stdout:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-8:])
            raise SubmissionError(f"no profile: ncu exited {done.returncode}:\n{tail}")
        return done.stdout[-4_000_000:]

    def close(self) -> None:
        if self._module_name:
            sys.modules.pop(self._module_name, None)

    def _import_python(self) -> Callable:
        path = self.build.source_path
        if self.build.extensions:  # what the solution's load_inline imports instead of building
            from kerneldojo.adapters.runtime import use_prebuilt_extensions

            use_prebuilt_extensions(self.build.extensions)
        self._module_name = f"kerneldojo_submission_{os.getpid()}_{next(_module_ids)}"
        spec = importlib.util.spec_from_file_location(self._module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[self._module_name] = module
        try:
            with interpreter(self.device.mode == "cpu"):
                spec.loader.exec_module(module)
        except Exception as e:
            raise CompileError(f"importing the submission failed:\n{self._format(e)}") from None
        fn = getattr(module, "solution", None)
        if not callable(fn):
            raise CompileError("the submission defines no function `solution(*inputs)`")
        return fn

    def _load_native(self, library: Path) -> ctypes._CFuncPtr:
        try:
            lib = ctypes.CDLL(str(library), mode=os.RTLD_LOCAL)
            entry = lib.solution
        except (OSError, AttributeError) as e:
            raise CompileError(f'loading the built library failed: {e}; define extern "C" void solution(...)') from None
        entry.argtypes = [p.ctypes_type() for p in self.task.c_params]
        entry.restype = None
        return entry

    def _call_native(self, inputs, shape: dict, outputs) -> None:
        if self.device.mode != "gpu":
            raise SubmissionError("CUDA submissions run only on a GPU")
        tensors = dict(zip(self.task.spec.inputs, inputs)) | dict(zip(self.task.spec.outputs, outputs))
        stream = torch.cuda.current_stream(self.device.torch_device).cuda_stream
        args = []
        for param in self.task.c_params:
            if param.name == "stream":
                args.append(stream)
            elif param.name in tensors:
                args.append(tensors[param.name].data_ptr())
            elif param.name in shape:
                args.append(shape[param.name])
            else:  # validated when the task loaded: <tensor>_stride<dim>
                tensor, dim = STRIDE_PARAM.fullmatch(param.name).groups()
                args.append(tensors[tensor].stride(int(dim)))
        self._entries[shape["dtype"]](*args)

    def _format_triton_compile_error(self, error: BaseException) -> str:
        """Triton numbers lines from the kernel's `def`; turn that into the submission's line."""
        src, node = getattr(error, "src", None), getattr(error, "node", None)
        if not src or not hasattr(node, "lineno"):
            return self._format(error)
        lines = self.build.source_path.read_text().splitlines()
        first = src.strip().splitlines()[0].strip()
        start = next((i for i, line in enumerate(lines) if line.strip() == first), None)
        if start is None:
            return self._format(error)
        lineno = start + node.lineno
        cause = error.__cause__
        detail = (getattr(error, "error_message", None) or "").strip() or (
            f"{type(cause).__name__} {cause}".strip() if cause else "")
        return f"submission.py, line {lineno}: Triton compile error: {detail}\n    {lines[lineno - 1].strip()}"

    def _format(self, error: BaseException) -> str:
        """The traceback frames in the submission file, then the error itself."""
        path = str(self.build.source_path)
        frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == path]
        lines = [f"  submission.py, line {f.lineno}, in {f.name}\n    {f.line}" for f in frames[-5:]]
        message = str(error).replace(path, "submission.py").strip()
        return "\n".join([*lines, f"{type(error).__name__}: {message}"])


def _extensions_built_here(writable: tuple[str, ...], installed: tuple[str, ...] = ()) -> list[str]:
    """The compiled extension modules loaded from the folders this worker can write (`writable`): those the
    submission built (torch's load_inline builds in this worker's scratch folder); their kernels are its own. Read
    as plain data, running no code of the submission's: modules of exactly the module type, `__file__` an exact str
    from the module's dict (red team round 21: a module whose `__file__` was a property ran after the profile and
    rewrote the figures in `time`'s frame); a `sys.modules` replaced by another type lists none. Paths are resolved
    first (round 87: `//usr/...` or `/proc/self/root/...` named torch's own library as one built here); only the
    writable folders count (round 89: excluding the installation's prefixes left the CUDA toolkit's libraries),
    less the `installed` folders within them."""
    roots, fixed = (tuple(root.rstrip(os.sep) + os.sep for root in folders) for folders in (writable, installed))
    modules = list(dict.values(sys.modules)) if type(sys.modules) is dict else []
    files = (dict.get(m.__dict__, "__file__") for m in modules if type(m) is types.ModuleType)
    found = {os.path.realpath(f) for f in files if type(f) is str and f.endswith(".so")}
    return sorted(f for f in found if f.startswith(roots) and not f.startswith(fixed))

