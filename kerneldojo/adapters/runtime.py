"""What the adapters' generated files call at run time, on both sides of the trust boundary.

A task folder the adapters write holds the suite's own problem text with a few lines appended (or,
for a submission, wrapped around it); those lines call these functions. The reference side runs in the
judge and in the worker (it makes the timed inputs there); the submission side runs only in the worker.
Nothing here imports either side.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import inspect
import json
import os
import re
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from kerneldojo.graders.profile import parse_python, parse_source

APPENDED = "# ---- appended by kerneldojo"  # where a generated file's own lines start


def with_prelude(source: str, prelude: str) -> str:
    """`source` with the one-line `prelude` run before its first top-level import or simple statement, on a line
    of its own only where the source has a blank or comment line there (else joined to that statement's line
    with `;`): either way every line of the source keeps its number, so a traceback names the user's own line
    (Triton also reads kernels back from the file by line). After the module's docstring and `from __future__`
    imports, which must come first. A source of compound statements alone (`def`, `class`) has nowhere to put it:
    None."""
    # Python's own line ends only: `splitlines` also breaks at form feeds and U+2028, which a comment or a string
    # may hold, and moved the rest of such a line out of it (red team round 59)
    lines = re.split(r"\r\n|\r|\n", source)
    if (tree := parse_python(source)) is None:
        return None
    body = tree.body
    start = 0  # lines[:start] are taken (the module's docstring, future imports)
    for index, node in enumerate(body):
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))]) - 1
        docstring = index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(
            node.value.value, str)  # before future imports, which may follow it (red team round 70)
        if docstring or (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            start = node.end_lineno
            continue
        free = [i for i in range(start, first) if not lines[i].strip() or lines[i].lstrip().startswith("#")]
        if free:
            i = free[0]
            lines[i] = prelude + (f"  {lines[i].strip()}" if lines[i].strip() else "")
            return _joined(lines)
        if not isinstance(node, _COMPOUND) and first == node.lineno - 1:
            lines[first] = f"{prelude}; {lines[first]}"
            return _joined(lines)
        start = node.end_lineno
    return None


def _joined(lines: list[str]) -> str:
    return "\n".join(lines) + ("" if lines[-1] == "" else "\n")


_COMPOUND = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.AsyncFor, ast.While, ast.With,
             ast.AsyncWith, ast.Try, ast.Match, *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))


def size_constants(source: str) -> dict[str, int]:
    """A problem's sizes: its module-level names bound to an int (`N = 2048 * 2`, `height = width = 128`) or to
    a tuple of ints (`input_shape = (32768,)` gives `input_shape[0]`) by an expression that names nothing
    else. Names computed from others (`bias_shape = (out_channels, 1, 1)`) follow them (`resize`)."""
    sizes = {}
    for names, value in _assignments(parse_source(source)):
        if any(isinstance(n, ast.Name) for n in ast.walk(value)):
            continue
        try:
            evaluated = eval(compile(ast.Expression(value), "<size>", "eval"), {"__builtins__": {}})
        except Exception:
            continue
        for name in names:
            if type(evaluated) is int:
                sizes[name] = evaluated
            elif isinstance(evaluated, tuple) and evaluated and all(type(e) is int for e in evaluated):
                sizes |= {f"{name}[{i}]": e for i, e in enumerate(evaluated)}
    return sizes


def resize(ns: dict, values: dict[str, int], source: str | None = None) -> None:
    """Re-run a problem module's top-level assignments with these sizes, so names computed from them follow.
    `source` defaults to the module's file, up to what a generated file appended."""
    if not values or ns.get("_kd_sizes") == values:
        return
    if source is None:
        source = Path(ns["__file__"]).read_text().split(APPENDED)[0]
    body: list[ast.stmt] = []
    for names, value in _assignments(parse_source(source)):
        for name in names:
            if name in values:
                value_now = ast.Constant(values[name])
            elif f"{name}[0]" in values:
                count = sum(1 for k in values if k.startswith(f"{name}["))
                value_now = ast.Tuple([ast.Constant(values[f"{name}[{i}]"]) for i in range(count)], ast.Load())
            else:
                value_now = value
            body.append(ast.Assign([ast.Name(name, ast.Store())], value_now))
    exec(compile(ast.fix_missing_locations(ast.Module(body, [])), "<kerneldojo sizes>", "exec"), ns)
    ns["_kd_sizes"] = dict(values)


def _assignments(tree: ast.Module):
    """(names, value) of each module-level `a = b = value` binding plain names, and of each pair of
    `a, b = x, y`."""
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        if all(isinstance(t, ast.Name) for t in node.targets):
            names = [t.id for t in node.targets if not t.id.startswith("_")]
            if names:
                yield names, node.value
        elif (len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple) and isinstance(node.value, ast.Tuple)
              and len(node.targets[0].elts) == len(node.value.elts)
              and all(isinstance(t, ast.Name) for t in node.targets[0].elts)):  # height, width = 128, 128
            yield from (([t.id], v) for t, v in zip(node.targets[0].elts, node.value.elts) if not t.id.startswith("_"))


def kernelbench_reference(ns: dict, sizes: list[str], init_seed: int) -> tuple[Callable, ...]:
    """make_inputs, reference, flops and bytes_moved of a KernelBench problem module `ns` (its globals).

    The module-level size constants named in `sizes` are set from the shape before `get_inputs()`,
    `get_init_inputs()` and `Model(...)` run, and are passed to reference() after the tensors (a
    task's `scalars`), so the weights follow the sizes. Weights come from `init_seed`, as the
    solution's `ModelNew` gets them (`kernelbench_solution`)."""
    models: dict = {}

    def make_inputs(shape: dict, seed: int, device) -> tuple:
        resize(ns, {k: shape[k] for k in sizes})
        with torch.random.fork_rng(devices=[]), torch.device(device), _Initialised():
            torch.manual_seed(seed)
            inputs = ns["get_inputs"]()
        return tuple(t.to(device) if isinstance(t, torch.Tensor) else t for t in inputs)

    def reference(*args):
        tensors, key = split_sizes(args, len(sizes))
        device = next(t.device for t in tensors if isinstance(t, torch.Tensor))
        if (key, device) not in models:
            resize(ns, dict(zip(sizes, key)))
            models[key, device] = seeded_model(ns["Model"], ns["get_init_inputs"](), init_seed).to(device)
        with torch.no_grad():
            return models[key, device](*tensors)

    def bytes_moved(shape: dict) -> int:
        # The inputs once, a floor any solution that reads them meets (made on the meta device: no memory).
        resize(ns, {k: shape[k] for k in sizes})
        with contextlib.suppress(Exception), torch.device("meta"):
            return max(1, sum(t.nbytes for t in ns["get_inputs"]() if isinstance(t, torch.Tensor)))
        return 1

    return make_inputs, reference, lambda shape: 0, bytes_moved


def split_sizes(args: tuple, count: int) -> tuple[tuple, tuple]:
    """(tensors, size values): what reference() and solution() get, the task's scalars last."""
    cut = len(args) - count
    return args[:cut], tuple(args[cut:])


def seeded_model(cls: type, init_inputs, seed: int) -> torch.nn.Module:
    """`cls(*init_inputs)` with the global generator at `seed` (as KernelBench's harness builds both models),
    leaving the caller's generator state as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return cls(*init_inputs)


def kernelbench_solution(ns: dict, sizes: list[str], init_inputs: dict, init_seed: int) -> Callable:
    """`solution(*inputs, *sizes)` over a KernelBench solution module's `ModelNew`: one model per size
    set and device, its weights drawn as the reference's are (`seeded_model`)."""
    if not isinstance(ns.get("ModelNew"), type):
        raise ImportError("a KernelBench solution must define `class ModelNew(nn.Module)`")
    models: dict = {}

    def solution(*args):
        tensors, key = split_sizes(args, len(sizes))
        device = next(t.device for t in tensors if isinstance(t, torch.Tensor))
        if (key, device) not in models:
            models[key, device] = seeded_model(ns["ModelNew"], init_inputs[key], init_seed).to(device)
        with torch.no_grad():
            return models[key, device](*tensors)

    return solution


# -- load_inline CUDA solutions ----------------------------------------------------------------------

EXTENSION_PRELUDE = "import kerneldojo.adapters.runtime as _kd_runtime; _kd_runtime.name_extensions_by_content()"


class BuildsAhead(str):
    """A solution's text as an adapter wrapped it with EXTENSION_PRELUDE: the judge builds its load_inline calls
    ahead, confined (`graders.extensions`). The mark is this type, given by the adapter's own code: no text in a
    submission (the prelude quoted in a comment) turns the judge's builds on."""
# load_inline's arguments that do not change the binary.
_NOT_BUILD_INPUTS = {"name", "verbose", "build_directory", "keep_intermediates"}


def extension_key(arguments: dict, torch_version: str, cuda_version: str | None, arch: str) -> str:
    """What a load_inline build's binary depends on: its sources, functions and flags, torch's and CUDA's
    versions and the GPU's arch. Equal keys, equal extensions."""
    inputs = {k: v for k, v in sorted(arguments.items()) if k not in _NOT_BUILD_INPUTS and v is not None}
    text = json.dumps([inputs, torch_version, cuda_version, arch], sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def extension_name(arguments: dict, key: str) -> str:
    """The name the extension is built under: `kd_<key>` (torch's extension cache and Python's modules are
    keyed by name, so two different sources under one name would meet), unless the sources bind a module
    name of their own (`PYBIND11_MODULE(my_ext, m)`), which the built library must keep."""
    sources = " ".join(s for v in (arguments.get("cpp_sources"), arguments.get("cuda_sources"))
                       for s in ([v] if isinstance(v, str) else v or []))
    own = re.search(r"PYBIND11_MODULE\(\s*(\w+)", sources)
    return own[1] if own and own[1] != "TORCH_EXTENSION_NAME" else f"kd_{key}"


def load_inline_calls(source: str) -> list[dict]:
    """The load_inline calls of a solution's text, read without running it: each call's arguments where every
    one is a literal or a module-level name bound to one (KernelBench's form); calls built at run time are
    left out (they build uncached, in the worker)."""
    if (tree := parse_python(source)) is None:
        return []
    names = {t.id: node.value for node in tree.body if isinstance(node, ast.Assign)
             for t in node.targets if isinstance(t, ast.Name)}
    params = list(inspect.signature(_load_inline()).parameters)
    literal = _Literals(names, 2 * sum(1 for _ in ast.walk(tree)))
    calls = []
    for node in ast.walk(tree):
        func = getattr(node, "func", None)
        if not isinstance(node, ast.Call) or getattr(func, "attr", getattr(func, "id", None)) != "load_inline":
            continue
        try:
            arguments = dict(zip(params, (literal(a) for a in node.args)))
            for keyword in node.keywords:  # `**opts` (arg None) spreads a dict, as the call binds it in the worker
                value = literal(keyword.value)
                arguments |= value if keyword.arg is None else {keyword.arg: value}
        except _OverBudget:  # the rest build in the worker, under its limits
            break
        except Exception:  # not literal data (`{[]: 1}` raises TypeError, deep nesting RecursionError): left out
            continue
        # Only what load_inline itself would take (red team round 96: `**opts` made a None key, an int flag crashed
        # the judge's pre-build, and one such source stopped a whole suite's): anything else builds in the worker,
        # which says what is wrong with it.
        if all(isinstance(k, str) for k in arguments) and all(
                _strings(arguments.get(a)) for a in arguments if a.endswith(("sources", "cflags", "ldflags", "paths"))):
            calls.append(arguments)
    return calls


def _strings(value) -> bool:
    """None, a str, or a list or tuple of them: what load_inline takes for its sources and flags."""
    return value is None or isinstance(value, str) or (
        isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value))


class _OverBudget(Exception):
    pass


class _Literals:
    """A call argument's literal value (a module-level name gives the literal bound to it), with the nodes evaluated
    over all calls bounded by `budget`, a multiple of the source's: a name is 4 characters however large its
    literal (red team round 113: 24,500 spreads `**F` of one 12,000-key dict kept the judge's process busy 8 min)."""

    def __init__(self, names: dict, budget: int):
        self.names, self.budget, self.sizes = names, budget, {}

    def __call__(self, node: ast.expr):
        if isinstance(node, ast.Name) and node.id in self.names:
            node = self.names[node.id]
        if id(node) not in self.sizes:
            self.sizes[id(node)] = sum(1 for _ in ast.walk(node))
        self.budget -= self.sizes[id(node)]
        if self.budget < 0:
            raise _OverBudget
        return ast.literal_eval(node)


def _load_inline():
    from torch.utils import cpp_extension

    return getattr(cpp_extension.load_inline, "__wrapped__", cpp_extension.load_inline)


def device_arch() -> str:
    if torch.cuda.is_available():
        return "sm_{}{}".format(*torch.cuda.get_device_capability())
    return os.environ.get("TORCH_CUDA_ARCH_LIST", "none")


def buildable_here(arguments: dict) -> bool:
    """Whether a load_inline call with these arguments can build with this torch: a C++-only one (`cpp_sources`
    alone) anywhere, a CUDA one only where torch has CUDA."""
    return torch.version.cuda is not None or not (arguments.get("cuda_sources") or arguments.get("with_cuda"))


def name_extensions_by_content() -> None:
    """A solution's prelude, in the worker: its load_inline extensions are named by their content
    (`extension_name`), whatever name it gives them. The build itself is torch's, in this (confined) worker."""
    from torch.utils import cpp_extension

    original = _load_inline()
    signature = inspect.signature(original)

    @functools.wraps(original)
    def load_inline(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        if not buildable_here(bound.arguments):
            # What the solution runs decides, not its text (red team rounds 58, 59: a comment, or a CUDA branch
            # not taken on a CPU, had solutions skipped)
            raise RuntimeError("load_inline was asked to build CUDA (cuda_sources or with_cuda=True), which needs a "
                               "GPU judge: this one runs in CPU mode, where only C++ (cpp_sources) builds")
        key = extension_key(bound.arguments, torch.__version__, torch.version.cuda, device_arch())
        name = bound.arguments["name"] = extension_name(bound.arguments, key)
        if name in _prebuilt and bound.arguments.get("is_python_module", True) is True:
            return import_extension(name, _prebuilt[name])
        return original(*bound.args, **bound.kwargs)

    cpp_extension.load_inline = load_inline


_prebuilt: dict[str, Path] = {}  # module name -> library the judge built (`graders.extensions`)


def use_prebuilt_extensions(libraries: dict[str, Path]) -> None:
    """The worker, before it imports a solution: these libraries are its load_inline calls' builds, by name."""
    _prebuilt.update(libraries)


def import_extension(name: str, library: Path) -> types.ModuleType:
    """A built extension module, imported from its library under the name it was built with (its
    `PyInit_<name>`), as torch's load_inline imports what it built."""
    import importlib.machinery
    import importlib.util

    loader = importlib.machinery.ExtensionFileLoader(name, str(library))
    spec = importlib.util.spec_from_file_location(name, library, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


# -- GPU MODE reference-kernels --------------------------------------------------------------------


def gpumode_reference(ns: dict, form: str, buffers: dict[int, str]) -> tuple[Callable, ...]:
    """make_inputs, reference, flops, bytes_moved and check of a reference-kernels problem module `ns`.

    `generate_input(**sizes, seed=...)` makes `data` (one tensor, or a tuple or list of them: `form`),
    whose tensors are the task's inputs, but for the output buffers ref_kernel fills (`buffers`, index ->
    dtype: pmpp_v2's form), which the worker gets as their shape alone (`buffer_descriptor`). `check(inputs,
    outputs, shape)` is the problem's own `check_implementation`, returning what is wrong ("" or None when
    nothing is). Its code names "cuda": on a CPU-only judge it runs on the CPU (`cuda_on_cpu`)."""

    def make_inputs(shape: dict, seed: int, device) -> tuple:
        kwargs = {k: v for k, v in shape.items() if k != "dtype"}
        with on_device(device), _Initialised():
            data = ns["generate_input"](**kwargs, seed=seed)
        tensors = (data,) if form == "tensor" else data
        return tuple(buffer_descriptor(t) if i in buffers else t.to(device) for i, t in enumerate(tensors))

    def reference(*inputs):
        with on_device(inputs[0].device):
            return ns["ref_kernel"](pack(with_buffers(inputs, buffers), form))

    def check(inputs: tuple, outputs: tuple, shape: dict) -> str | None:
        data = pack(with_buffers(tuple(t.clone() for t in inputs), buffers), form)
        with on_device(inputs[0].device):
            verdict = ns["check_implementation"](data, outputs[0] if len(outputs) == 1 else outputs)
        good, why = verdict if isinstance(verdict, tuple) else (not verdict, verdict)
        return None if good else str(why or "check_implementation rejected the output")

    def bytes_moved(shape: dict) -> int:
        return 1  # unknown: generate_input makes real tensors, so no meta-device estimate

    return make_inputs, reference, lambda shape: 0, bytes_moved, check


def buffer_descriptor(buffer: torch.Tensor) -> torch.Tensor:
    """An output buffer of `data` as the worker gets it: its shape, as int64 (its dtype is the task's)."""
    return torch.tensor(buffer.shape, dtype=torch.int64, device=buffer.device)


def with_buffers(tensors: tuple, buffers: dict[int, str]) -> tuple:
    """`data`'s tensors with a fresh buffer for each descriptor, holding the judge's poison for its dtype (round 56:
    an integer or bool buffer held whatever the memory held before)."""
    from kerneldojo.graders.correctness import poisoned_like

    def fresh(descriptor: torch.Tensor, dtype: str) -> torch.Tensor:
        shaped = torch.empty(descriptor.tolist(), dtype=getattr(torch, dtype), device=descriptor.device)
        return poisoned_like((shaped,))[0]

    return tuple(fresh(t, buffers[i]) if i in buffers else t for i, t in enumerate(tensors))


def gpumode_solution(ns: dict, form: str, buffers: dict[int, str]) -> Callable:
    """`solution(*tensors)` over a submission's `custom_kernel(data)`, with fresh output buffers."""
    if not callable(ns.get("custom_kernel")):
        raise ImportError("a GPU MODE submission must define `custom_kernel(data)`")
    return lambda *tensors: ns["custom_kernel"](pack(with_buffers(tensors, buffers), form))


def provide_appended_modules(file: str) -> None:
    """A submission's prelude: the problem's helper files, which its footer holds as `_kd_modules`, become
    importable by their names (`from task import input_t`) before its own first statement runs."""
    appended = Path(file).read_text().split(APPENDED)[-1].partition("\n")[2]  # after the marker's own line
    for node in parse_source(appended).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "_kd_modules":
            provide_modules(ast.literal_eval(node.value))
            return


def pack(tensors: tuple, form: str):
    return tensors[0] if form == "tensor" else list(tensors) if form == "list" else tuple(tensors)


def provide_modules(sources: dict[str, str]) -> None:
    """Make the problem's helper files (task.py, utils.py) importable by their names in this process."""
    for name, source in sources.items():
        module = types.ModuleType(name)
        module.__file__ = f"<{name}.py, from the problem folder>"
        sys.modules[name] = module
        exec(compile(source, module.__file__, "exec"), module.__dict__)


@contextlib.contextmanager
def staged(file: str, names: list[str]) -> Iterator[None]:
    """While a problem's reference.py imports, its folder's helper modules (`names`) come first on
    sys.path and under their own names; afterwards the names are released (the reference's functions
    keep their modules), so two problems' `utils` never meet."""
    saved = {n: sys.modules.pop(n) for n in names if n in sys.modules}
    sys.path.insert(0, str(Path(file).parent))
    try:
        yield
    finally:
        sys.path.remove(str(Path(file).parent))
        for name in names:
            sys.modules.pop(name, None)
        sys.modules.update(saved)


def on_device(device) -> contextlib.AbstractContextManager:
    return cuda_on_cpu() if torch.device(device).type == "cpu" else contextlib.nullcontext()


class _Initialised(TorchDispatchMode):
    """A problem's own input code, run in the judge: every uninitialised allocation is zeroed as it is made, at the
    dispatcher, where every spelling of one meets (`torch.Tensor(n)`, `x.new(n)`, `resize_`, the aten op itself: red
    team round 56). An allocation it leaves unwritten went to the worker with the judge's old memory in it (round 55:
    pmpp_v2's matmul sends its `torch.empty` output buffer as an input; a submission read 8 KiB of the judge's heap)."""

    EMPTY = frozenset({torch.ops.aten.empty, torch.ops.aten.empty_strided, torch.ops.aten.empty_like,
                       torch.ops.aten.new_empty, torch.ops.aten.new_empty_strided})  # fmt: skip

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        grown = args[0].numel() if func.overloadpacket is torch.ops.aten.resize_ else None
        out = func(*args, **(kwargs or {}))
        if func.overloadpacket in self.EMPTY and isinstance(out, torch.Tensor):
            out.zero_()
        elif grown is not None and out.numel() > grown:  # resize_ keeps what was there: the rest is zeroed
            out.view(-1)[grown:].zero_()
        return out


def _cuda(value) -> bool:
    return (isinstance(value, str) and value.startswith("cuda")) or (
        isinstance(value, torch.device) and value.type == "cuda")


class _CudaOnCpu(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if _cuda(kwargs.get("device")):
            kwargs["device"] = "cpu"
        if func is torch.Tensor.cuda:
            return args[0]
        if func is torch.Tensor.to:
            args = tuple("cpu" if _cuda(a) else a for a in args)
        return func(*args, **kwargs)


@contextlib.contextmanager
def cuda_on_cpu() -> Iterator[None]:
    """Code that names "cuda" (tensors, generators, synchronize) runs on the CPU: a problem's reference
    on a judge without a GPU. Trusted code only; it patches torch for the duration."""
    generator, synchronize = torch.Generator, torch.cuda.synchronize

    class cpu_generator(generator):  # a type, as torch.Generator is (pmpp_v2's utils write `torch.Generator | None`)
        def __new__(cls, device="cpu"):
            return generator(device="cpu" if _cuda(device) else device)

    torch.Generator, torch.cuda.synchronize = cpu_generator, lambda *a, **k: None
    try:
        with _CudaOnCpu():
            yield
    finally:
        torch.Generator, torch.cuda.synchronize = generator, synchronize
