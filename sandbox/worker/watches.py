"""The watches inside the worker: trusted code loaded before the submission, looking at what it does
from the same address space (forbidden operators, replaced functions, threads and processes left
running, calls of the reference). Best effort by construction: code in the same interpreter can
undo what it can see. What each finds is reported to the judge as a flag (`graders.checks.message`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import os
import sys
import threading
import time
import types
from collections.abc import Callable
from pathlib import Path

import torch
from torch._library import simple_registry as _rules
from torch.utils._python_dispatch import TorchDispatchMode

from . import triton_interpreter as _interpreter_fixes
from .triton_interpreter import in_launch as _in_launch


class ForbiddenOps(TorchDispatchMode):
    """Records calls to aten operators outside the task's allowlist (`Task.allowed_ops`: allocation,
    views, copies and casts, plus what the task allows by name); `None` allows everything.

    Composite operators decompose before they reach the dispatcher, so `torch.matmul` shows up as
    `aten.mm`. An in-place variant counts as its operator (`x.mul_(y)` is `aten.mul`). Triton's
    interpreter moves tensors with aten copies of its own inside a launch: those are not the
    submission's, and only the interpreter's own code gets that pass: a kernel's body is plain Python
    there and could call torch itself (CPU mode, where this watch is the only evidence, is best effort).
    """

    name = "forbidden_op"

    def __init__(self, allowed: frozenset[str] | None, called: list[str] | None = None):
        super().__init__()
        self.allowed = allowed
        self.called: list[str] = [] if called is None else called
        self.popped = False  # taken off the mode stack by someone else while active
        self._exiting = False
        torch_at_start()  # taken once, at the first watch (the harness's, before the submission loads)

    def __exit__(self, *exc):
        self._exiting = True
        try:
            return super().__exit__(*exc)
        finally:
            self._exiting = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.allowed is not None and func.namespace != "aten" and (kernel := _python_kernel(func, args)):
            # A `torch.library.custom_op` (or `triton_op`) runs Python: that function runs here, watched like
            # solution() itself, in place of whatever the operator's table holds (round 60: an honest kernel wrapped
            # so was flagged, as the watch could not see inside the operator).
            with self:
                return kernel(*args, **(kwargs or {}))
        # Named with its namespace: a custom operator named `rt::empty` is not `aten.empty` (red team round 50), and
        # the allowlist holds aten operators only, so every other namespace is flagged.
        op = f"{func.namespace}.{func.overloadpacket.__name__}"
        if op.endswith("_") and not op.endswith("__"):  # in-place twins (mul_, exp_) do the same work
            op = op[:-1]
        if self.allowed is not None:
            if foreign := [t for t in types if t not in torch_at_start().tensor_types]:
                # Its handler runs with every mode off the stack, this one included (red team round 59: torch.mm
                # inside a subclass's `__torch_dispatch__`, behind an allowed view of the wrapper; round 60: a
                # handler inherited from one of torch's own subclasses runs the class's hooks there)
                op = f"{op} (on a tensor subclass that dispatches itself: {foreign[0].__qualname__})"
            elif func.namespace == "aten" and _registered_since_start(func):
                op = f"{func.name()} (an overload, kernel or dispatch key the submission put in)"  # allowed or not
            elif func.namespace != "aten":  # the watch cannot see inside it (round 50)
                op = f"{op} (a custom operator with no Python kernel: define it with torch.library.custom_op, or " \
                     "call your kernels from solution() directly)"
            elif op in self.allowed or (op in INTERPRETER_OPS and _in_launch() and _called_by_interpreter()):
                op = None
            if op is not None and op not in self.called:
                self.called.append(op)
        return func(*args, **(kwargs or {}))


@dataclasses.dataclass(frozen=True)
class TorchAtStart:
    """What torch runs, as registered before any submission code (`torch_at_start`)."""

    tables: frozenset[tuple[str, str]]  # every aten operator's (name, `_dispatch_dump`)
    tensor_types: frozenset[type]  # the tensor types whose own dispatch an operator call may go through
    included_keys: int  # the dispatch keys a watched call runs with included (`DispatchKeySet.raw_repr`)


_AT_START: TorchAtStart | None = None


def torch_at_start() -> TorchAtStart:
    """What torch runs as registered before any submission code. Taken once, by the worker's warm-up; later calls
    return the first record (a cache a submission could clear was taken again after its registrations: red team
    round 59), and `Tampering` guards the record and what reads it.

    An overload that a submission defines in aten's own namespace (`aten::empty.kd`, named like an allowed operator)
    has no table in it, and a kernel it registers for an allowed one (`aten::diagonal` on the CPU key) changes that
    table (red team round 56); torch's own lazy imports (dynamo, inductor, decompositions, export, ...) change none.
    The tensor types are exact classes, not handlers (round 60: a handler can be inherited, or be an object naming
    torch's): FakeTensor and FunctionalTensor, which `torch.compile` traces with. The included keys are what a
    watched call sees with nothing pushed (round 60: a key included by the submission reached a backend fallback it
    registered, which no operator's table shows)."""
    global _AT_START
    if _AT_START is None:
        from torch._subclasses.fake_tensor import FakeTensor
        from torch._subclasses.functional_tensor import FunctionalTensor

        tables = frozenset((name, torch._C._dispatch_dump(name)) for name in torch._C._dispatch_get_all_op_names()
                           if name.startswith("aten::"))
        probe = _IncludedKeys()
        with probe:
            torch.zeros(1).add_(1)
        _AT_START = TorchAtStart(tables, frozenset({torch.Tensor, torch.nn.Parameter, FakeTensor, FunctionalTensor}),
                                 probe.seen)
    return _AT_START


_FIND_RULE = _rules.GenericTorchDispatchRuleHolder.find


def _find_rule_but_the_watchs(self, torch_dispatch_class: type):
    """torch's lookup of a `torch.library.register_torch_dispatch` rule, in a worker: a rule keyed by the watch's
    class would run in place of its `__torch_dispatch__` for that operator, unseen (red team round 75: `aten::mm`'s
    rule for `type(mode)`, or a custom_op's `register_torch_dispatch`). `Tampering` guards this lookup and what
    reaches it."""
    if isinstance(torch_dispatch_class, type) and issubclass(torch_dispatch_class, ForbiddenOps):
        return None
    return _FIND_RULE(self, torch_dispatch_class)


_rules.GenericTorchDispatchRuleHolder.find = _find_rule_but_the_watchs  # on import: before any submission's code


def _rule_holders_replaced() -> list[str]:
    """Operators whose rule holder is no longer torch's own (a holder of the submission's finds its own rules)."""
    holder = _rules.GenericTorchDispatchRuleHolder
    return [f"torch._library.simple_registry: {name}.torch_dispatch_rules"
            for name, entry in list(vars(_rules.singleton).get("_data", {}).items())
            if type(getattr(entry, "torch_dispatch_rules", None)) is not holder
            or "find" in vars(entry.torch_dispatch_rules)]


def _python_kernel(func, args: tuple):
    """The Python function a `torch.library.custom_op` runs for these arguments' device (a kernel registered for it,
    else the function it was defined with), or None for an operator defined any other way."""
    from torch._library.custom_ops import OPDEFS

    opdef = OPDEFS.get(getattr(func, "_name", ""))
    if opdef is None:
        return None
    device = next((a.device.type for a in args if isinstance(a, torch.Tensor)), None)
    kernel = opdef._backend_fns.get(device) or opdef._init_fn
    return kernel if callable(kernel) else None


class _IncludedKeys(TorchDispatchMode):
    seen = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen |= torch._C._dispatch_tls_local_include_set().raw_repr()
        return func(*args, **(kwargs or {}))


def _registered_since_start(func) -> bool:
    """Whether this aten operator may run other kernels than at the worker's start: a new overload, a table changed,
    a dispatch key included that a call does not have (a backend fallback the submission registered for it), or
    Python's dispatcher on, which runs kernels registered in Python (`OpOverload.py_impl`) that no table shows."""
    start = torch_at_start()
    return ((func.name(), torch._C._dispatch_dump(func.name())) not in start.tables
            or torch._C._dispatch_tls_local_include_set().raw_repr() & ~start.included_keys != 0)


def _called_by_interpreter() -> bool:
    """Whether the innermost Python caller outside torch runs the interpreter's own code: a code object of
    Triton's or of kerneldojo's fixes, by identity, with the globals it was defined with (a file name can be
    forged with `code.replace`, and a function rebuilt from the interpreter's code over other globals would
    call what those name)."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(_TORCH_CODE):
        frame = frame.f_back
    if frame is None:
        return False
    code, module_globals = interpreter_code().get(id(frame.f_code), (None, None))
    return code is frame.f_code and module_globals is frame.f_globals


_TORCH_CODE = os.path.dirname(torch.__file__) + os.sep
# What Triton's interpreter itself calls in a launch (moving arguments to and from its host copies), as
# recorded over the shipped Triton baselines: the only operators its pass can cover, whoever calls them.
INTERPRETER_OPS = frozenset({"aten.set", "aten.empty", "aten.new_empty", "aten.copy"})


@functools.cache
def interpreter_code() -> dict[int, tuple[types.CodeType, dict]]:
    """id(code) -> (code, globals) for every function of the Triton modules loaded and of kerneldojo's fixes
    to its interpreter, nested ones included. First called by the worker's warm-up, before any submission is
    imported, so nothing a submission defines is among them."""
    found: dict[int, tuple[types.CodeType, dict]] = {}

    def add(code: types.CodeType, module_globals: dict) -> None:
        found[id(code)] = (code, module_globals)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                add(const, module_globals)

    modules = [m for name, m in list(sys.modules.items()) if name.split(".")[0] == "triton"]
    for module in [*modules, _interpreter_fixes]:
        for value in list(vars(module).values()):
            members = vars(value).values() if isinstance(value, type) else ()
            for member in (value, *members):
                member = getattr(member, "__func__", getattr(member, "fget", member))
                if isinstance(getattr(member, "__code__", None), types.CodeType):
                    add(member.__code__, member.__globals__)
    return found


@contextlib.contextmanager
def watching(watch: ForbiddenOps):
    """`watch` active, and the two ways around it closed while it is: every thread that starts runs
    under a watch of its own recording into the same list (a dispatch mode is thread-local), and
    popping a watch off the mode stack (`_disable_current_modes`) is recorded in `watch.popped`."""
    from torch.utils import _python_dispatch

    bootstrap = threading.Thread._bootstrap_inner  # runs `run`, a subclass's override included
    pop_mode = _python_dispatch._pop_mode

    def watched(thread):
        with ForbiddenOps(watch.allowed, watch.called):
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


def _guarded(extra: dict[str, tuple[object, list[str]]]) -> dict[str, tuple[object, str]]:
    """What timing and checking rely on, by name: (owner, attribute). `extra`: the harness's own."""
    from kerneldojo.graders import correctness, profile, timing

    owners = {
        # current_device, _lazy_init, _cuda_getDevice: what Triton's driver calls at every launch, the harness's
        # flush and gate included (red team round 107)
        "torch.cuda": (torch.cuda, ["synchronize", "current_stream", "Event", "Stream", "stream", "current_device",
                                    "_lazy_init"]),
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
        "kerneldojo.graders.correctness": (correctness, ["check_no_aliasing", "check_outputs"]),
        "ForbiddenOps": (ForbiddenOps, ["__torch_dispatch__", "__enter__", "__exit__"]),
        # what the operator watch reads torch's state with, and its record of that state (red team round 59)
        "kerneldojo.sandbox.worker.watches": (sys.modules[__name__], ["_AT_START", "torch_at_start",
                                                                      "_registered_since_start"]),
        "torch._C": (torch._C, ["_dispatch_dump", "_dispatch_tls_local_include_set", "_dispatch_get_all_op_names",
                                "_cuda_getDevice", "_cuda_getCurrentRawStream"]),
        # where torch looks up a dispatch rule for a mode (round 75)
        "torch._library.simple_registry": (_rules, ["singleton", "find_torch_dispatch_rule"]),
        "torch._library.simple_registry.SimpleLibraryRegistry": (_rules.SimpleLibraryRegistry, ["find"]),
        "torch._library.simple_registry.GenericTorchDispatchRuleHolder": (_rules.GenericTorchDispatchRuleHolder,
                                                                          ["find"]),
        "Tampering": (Tampering, ["changed"]),
        **extra,
    }
    return {f"{prefix}.{attr}": (owner, attr) for prefix, (owner, attrs) in owners.items() for attr in attrs}


def module_functions(module) -> list[str]:
    """A module's functions by name, as it holds them (what it imported included)."""
    return [n for n in vars(module) if inspect.isfunction(getattr(module, n))]


def _own_callables(module) -> list[str]:
    return [n for n, v in vars(module).items() if callable(v) and getattr(v, "__module__", "") == module.__name__]


class Tampering:
    """Identity of every guarded function, taken before the submission loads; `changed()` lists the
    ones that are no longer the same object (a monkeypatched timer, synchronize or judge function).
    `guard`: more owners to watch, by name: (object, attribute names)."""

    name = "tampering"

    def __init__(self, guard: dict[str, tuple[object, list[str]]] | None = None,
                 objects: dict[str, Callable[[], object]] | None = None):
        """`objects`: more to guard whole, by name, each as the call that gets it (`ObjectState`): what the
        harness launches through."""
        self._watch = _guarded(guard or {})
        self._before = {name: _identity(_raw(owner, attr)) for name, (owner, attr) in self._watch.items()}
        seen: dict[int, int] = {}  # what one holds the next need not: their classes and Triton's globals overlap
        self._objects = {name: ObjectState(get, seen=seen) for name, get in (objects or {}).items()}

    def changed(self) -> list[str]:
        return [name for name, (owner, attr) in self._watch.items()
                if any(a is not b for a, b in zip(_identity(_raw(owner, attr)), self._before[name], strict=True))
                ] + [f"{name}: {where}" for name, state in self._objects.items() if (where := state.changed())
                     ] + _rule_holders_replaced()


_MISSING = object()
_SCALARS = (int, float, complex, str, bytes, bool, type(None))
_LEAVES = (*_SCALARS, types.ModuleType, type, torch.Tensor, types.CodeType)


class ObjectState:
    """What an object runs through, as taken now: each class of its MRO with every non-scalar entry (methods, and
    objects such as Triton's launch-hook chains, which live on `knobs.runtime`'s class), its instance attributes, the
    contents of the lists, tuples and dicts they hold, and theirs in turn (`depth` deep). `changed()` says where a
    value is no longer the same object, a list holds other items (a hook appended), an instance attribute shadows a
    class's, or `get()` now returns another object than the one taken (a cache cleared, then a look-alike made).

    Red team round 104: an instance `run` on the harness's L2-flush kernel (a Triton `JITFunction` nothing guarded)
    launched the submission's work in the flush's place, under the flush's name, which the profile leaves out. Round
    105: a hook appended to its `pre_run_hooks`, one added to Triton's global launch hook, and the kernel's cache
    cleared with `triton.jit` replaced ran the submission's code there too. Round 106: Triton's active driver, which
    `JITFunction.run` reaches through a module global, had its `get_current_device` replaced (the driver's config is
    one of the objects guarded, `harness.harness_kernels`). Module globals are not walked: holding every global that
    reached code names flagged honest kernels (Triton rebinds `triton.language.standard`'s as it compiles). Scalars
    may change to other scalars (counters, a knob set by honest code: round 106 found those flagged), not to code;
    entries added to a dict later (a compile cache's new specialisation) are not checked."""

    def __init__(self, get: Callable[[], object], depth: int = 6, seen: dict[int, int] | None = None):
        """`seen`: id -> the depth left where an ObjectState of the same watch took it (taken again only deeper)."""
        self._get = get
        self._root = get()
        self._held: list[tuple[object, str, object, object]] = []  # (owner, kind, key, value as taken)
        self._instances: list[tuple[object, frozenset[str]]] = []
        self._take(self._root, depth, {} if seen is None else seen)

    def _take(self, value: object, depth: int, seen: dict[int, int]) -> None:
        if depth < 0 or seen.get(id(value), -1) >= depth or isinstance(value, _LEAVES) or _namespace(value):
            return
        seen[id(value)] = depth
        if isinstance(value, dict):
            items = list(value.items())
            self._held += [(value, "item", k, v) for k, v in items if not isinstance(v, _SCALARS)]
        elif isinstance(value, (list, tuple)):
            items = list(enumerate(value))
            self._held.append((value, "items", None, tuple(value)))
        else:
            items = []
            for klass in type(value).__mro__[:-1]:
                if seen.get(id(klass), -1) < depth:
                    seen[id(klass)] = depth
                    entries = [(k, v) for k, v in vars(klass).items() if not isinstance(v, _SCALARS)]
                    self._held += [(klass, "class", k, v) for k, v in entries]
                    items += entries
            attributes = getattr(value, "__dict__", None)
            if isinstance(attributes, dict):
                own = list(attributes.items())
                self._held += [(value, "attr" if not isinstance(v, _SCALARS) else "scalar", k, v) for k, v in own]
                self._instances.append((value, frozenset(attributes)))
                items += own
        if isinstance(value, types.FunctionType):  # its code and defaults (`_identity`)
            self._held += [(value, "get", k, getattr(value, k)) for k in ("__code__", "__defaults__", "__kwdefaults__")]
        for _, item in items:
            self._take(item, depth - 1, seen)

    def changed(self) -> str | None:
        if self._get() is not self._root:
            return f"another {type(self._root).__name__} in its place"
        for owner, kind, key, value in self._held:
            if kind == "items":
                if len(owner) != len(value) or any(a is not b for a, b in zip(owner, value)):
                    return f"a {type(owner).__name__} it holds has other items"
                continue
            now = (owner.get(key, _MISSING) if kind == "item" else getattr(owner, key, _MISSING) if kind == "get"
                   else vars(owner).get(key, _MISSING) if kind == "class"
                   else getattr(owner, "__dict__", {}).get(key, _MISSING))
            if kind == "scalar":  # a setting may change, not become code (a knob's hook, a driver set in its place)
                if not isinstance(now, _SCALARS) and now is not _MISSING:
                    return f"{type(owner).__name__}.{key} set to a {type(now).__name__}"
                continue
            if now is not value:
                return f"{type(owner).__name__ if kind != 'class' else owner.__name__}.{key} replaced"
        for instance, keys in self._instances:
            for key in set(vars(instance)) - keys:  # a scalar there is a setting (an honest knob, round 106)
                if not isinstance(vars(instance)[key], _SCALARS) and any(
                        key in vars(klass) for klass in type(instance).__mro__[:-1]):
                    return f"{type(instance).__name__}.{key} shadowed by an instance attribute"
        return None


def _namespace(value: object) -> bool:
    """A module's globals (a kernel's `__globals__`): its own functions are guarded by name (`_guarded`)."""
    return isinstance(value, dict) and "__builtins__" in value and "__name__" in value



def _identity(value: object) -> tuple:
    """The object, and for a function the code it runs and the defaults it binds (held, so that no id is reused):
    the same function object with another `__code__` is another function (red team round 14: `Solution.time`'s
    code was swapped)."""
    function = getattr(value, "__func__", value)  # a staticmethod or classmethod's function
    return (value, getattr(function, "__code__", None), getattr(function, "__defaults__", None),
            getattr(function, "__kwdefaults__", None))


def _raw(owner: object, attr: str) -> object:
    # The attribute as stored (not bound): a bound method is a new object on every access. A dict's entry by key.
    if isinstance(owner, dict):
        return owner.get(attr)
    for klass in (owner.__mro__ if isinstance(owner, type) else ()):
        if attr in vars(klass):
            return vars(klass)[attr]
    try:
        return getattr(owner, attr, None)
    except ValueError:  # an emptied closure cell
        return None


# Libraries whose code the walk below does not enter (their own bindings reached by name are still guarded).
LIBRARIES = ("torch", "triton", "numpy", "functools", "contextlib", "builtins")


def reachable_bindings(entry: object, label: str) -> dict[str, tuple[object, list[str]]]:
    """Every binding `entry` can look up when it runs, as `Tampering` guards: for each Python function reached (from
    `entry`, then through what it reaches, libraries' code not entered), the module globals its code names, its
    closure's cells, each callable entry of a dict it holds (a problem module's namespace: `ns["get_inputs"]`), and
    the attributes its code names on the modules and classes so reached (`torch.random.fork_rng`). Replacing any of
    them makes the function run other code than it did when this was taken (red team round 34: an adapted problem's
    `make_inputs` looked `get_inputs` up in a dict at every refill, and the submission's replacement ran there)."""
    guards: dict[int, tuple[object, str, set[str]]] = {}
    seen: set[int] = set()
    functions = [entry]

    def guard(owner: object, attr: str, name: str) -> None:
        guards.setdefault(id(owner), (owner, name, set()))[2].add(attr)

    def reach(value: object, names: set[str], depth: int = 0) -> None:
        if isinstance(value, (types.FunctionType, types.MethodType)):
            functions.append(getattr(value, "__func__", value))
        elif isinstance(value, dict) and depth < 2:
            for key, item in list(value.items()):
                if isinstance(key, str) and (callable(item) or isinstance(item, types.ModuleType)):
                    guard(value, key, f"a namespace the refills read ({len(value)} names)")
                    reach(item, names, depth + 1)
        elif isinstance(value, (types.ModuleType, type)) and depth < 3:
            for name in sorted(names & set(vars(value))):
                item = vars(value)[name]
                if callable(item) or isinstance(item, (types.ModuleType, staticmethod, classmethod)):
                    guard(value, name, getattr(value, "__name__", "?"))
                    reach(item, names, depth + 1)

    while functions:
        function = functions.pop()
        if id(function) in seen or not isinstance(function, types.FunctionType):
            continue
        seen.add(id(function))
        if function is not entry and str(function.__module__).split(".")[0] in LIBRARIES:
            continue
        names, codes = set(), [function.__code__]
        while codes:
            code = codes.pop()
            names |= set(code.co_names)
            codes += [c for c in code.co_consts if inspect.iscode(c)]
        namespace = function.__globals__
        module = sys.modules.get(namespace.get("__name__", ""))
        holder = module if module is not None and vars(module) is namespace else namespace
        for name in sorted(names & set(namespace)):
            # Code it may run, not data: an adapted problem's size constants are rebound at every refill (`resize`).
            if callable(namespace[name]) or isinstance(namespace[name], types.ModuleType):
                guard(holder, name, str(namespace.get("__name__", "?")))
                reach(namespace[name], names)
        for cell in function.__closure__ or ():
            with contextlib.suppress(ValueError):  # an empty cell
                contents = cell.cell_contents
                guard(cell, "cell_contents", f"{function.__qualname__}'s closure")
                reach(contents, names)
    return {f"{label}: {name} ({i})": (owner, sorted(attrs)) for i, (owner, name, attrs) in enumerate(guards.values())}


def live_threads() -> dict[int, str]:
    """Every thread running Python here: `threading`'s and raw `_thread` ones, which `threading.enumerate` does not
    list (red team round 45: a raw thread wrote the paid calls' outputs once the timing and profile windows had
    closed, before the reply was made). A native thread that never runs Python is not seen."""
    named = {t.ident: t.name for t in threading.enumerate() if t.is_alive()}
    return {ident: named.get(ident, "a raw thread") for ident in sys._current_frames()}


def adopt_orphans() -> bool:
    """Make this process the reaper of its descendants' orphans, so that a grandchild whose parent exited (a
    double fork, `setsid`) stays this process's child, which `child_processes` lists (red team round 45: a GPU
    worker's detached helper, a fresh Python with its own CUDA context, did the work no profile of this process
    saw)."""
    import ctypes

    PR_SET_CHILD_SUBREAPER = 36
    return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def adopts_orphans() -> bool:
    """Is this process still its descendants' reaper (one `prctl` of the submission's turns it off: round 46)?"""
    import ctypes

    PR_GET_CHILD_SUBREAPER = 37
    flag = ctypes.c_int(0)
    return ctypes.CDLL(None, use_errno=True).prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) == 0 and \
        flag.value == 1


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


@contextlib.contextmanager
def no_submission_hooks():
    """The harness's own tensor ops with every torch dispatch and function mode off, the submission's included:
    a mode a call left pushed saw the refills' `copy_` and the reply's `detach` and did the work there, off the
    clock and after every check (red team round 20). `_inspect` flags a mode left behind.

    The modes are taken off their stacks, not disabled: the harness's own code may push its own (a problem's
    `make_inputs` under `with torch.device(...)`, itself a function mode; with torch functions disabled, a refill
    drew a KernelBench problem's inputs on the host's generator, and its timed outputs were checked against
    inputs the worker never used). Tensor subclasses' hooks stay off."""
    popped = [torch._C._pop_torch_function_stack() for _ in range(torch._C._len_torch_function_stack())]
    try:
        with torch.utils._python_dispatch._disable_current_modes(), torch._C.DisableTorchFunctionSubclass():
            yield
    finally:
        for mode in reversed(popped):
            torch._C._push_on_torch_function_stack(mode)


def mode_depths() -> tuple[int, int]:
    """How many torch dispatch and function modes are active on this thread."""
    return torch._C._len_torch_dispatch_stack(), torch._C._len_torch_function_stack()


def modes_left(baseline: tuple[int, int]) -> bool:
    """Whether more dispatch or function modes (`mode_depths`), or a trace or profile hook, are active than at
    `baseline`."""
    return (any(n > b for n, b in zip(mode_depths(), baseline)) or sys.gettrace() is not None
            or sys.getprofile() is not None)
