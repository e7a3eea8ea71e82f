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
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

APPENDED = "# ---- appended by kerneldojo"  # where a generated file's own lines start


def size_constants(source: str) -> dict[str, int]:
    """A problem's sizes: its module-level names bound to an int (`N = 2048 * 2`, `height = width = 128`) or to
    a tuple of ints (`input_shape = (32768,)` gives `input_shape[0]`) by an expression that names nothing
    else. Names computed from others (`bias_shape = (out_channels, 1, 1)`) follow them (`resize`)."""
    sizes = {}
    for names, value in _assignments(ast.parse(source)):
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
    for names, value in _assignments(ast.parse(source)):
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
        with torch.random.fork_rng(devices=[]), torch.device(device):
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


# -- GPU MODE reference-kernels --------------------------------------------------------------------


def gpumode_reference(ns: dict, form: str) -> tuple[Callable, ...]:
    """make_inputs, reference, flops, bytes_moved and check of a reference-kernels problem module `ns`.

    `generate_input(**sizes, seed=...)` makes `data` (one tensor, or a tuple or list of them: `form`),
    whose tensors are the task's inputs; `check(inputs, outputs, shape)` is the problem's own
    `check_implementation`, returning what is wrong ("" or None when nothing is). Its code names
    "cuda": on a CPU-only judge it runs on the CPU (`cuda_on_cpu`)."""

    def make_inputs(shape: dict, seed: int, device) -> tuple:
        kwargs = {k: v for k, v in shape.items() if k != "dtype"}
        with on_device(device):
            data = ns["generate_input"](**kwargs, seed=seed)
        return tuple(t.to(device) for t in ((data,) if form == "tensor" else data))

    def reference(*inputs):
        with on_device(inputs[0].device):
            return ns["ref_kernel"](pack(inputs, form))

    def check(inputs: tuple, outputs: tuple, shape: dict) -> str | None:
        data = pack(tuple(t.clone() for t in inputs), form)
        with on_device(inputs[0].device):
            verdict = ns["check_implementation"](data, outputs[0] if len(outputs) == 1 else outputs)
        good, why = verdict if isinstance(verdict, tuple) else (not verdict, verdict)
        return None if good else str(why or "check_implementation rejected the output")

    def bytes_moved(shape: dict) -> int:
        return 1  # unknown: generate_input makes real tensors, so no meta-device estimate

    return make_inputs, reference, lambda shape: 0, bytes_moved, check


def gpumode_solution(ns: dict, form: str) -> Callable:
    """`solution(*tensors)` over a submission's `custom_kernel(data)`."""
    if not callable(ns.get("custom_kernel")):
        raise ImportError("a GPU MODE submission must define `custom_kernel(data)`")
    return lambda *tensors: ns["custom_kernel"](pack(tensors, form))


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

    @functools.wraps(generator)
    def cpu_generator(device="cpu"):
        return generator(device="cpu" if _cuda(device) else device)

    torch.Generator, torch.cuda.synchronize = cpu_generator, lambda *a, **k: None
    try:
        with _CudaOnCpu():
            yield
    finally:
        torch.Generator, torch.cuda.synchronize = generator, synchronize
