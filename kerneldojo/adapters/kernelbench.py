"""KernelBench problems (ScalingIntelligence/KernelBench) as kerneldojo tasks, `ModelNew` solutions as submissions.

A problem file defines `class Model(nn.Module)`, `get_inputs()`, `get_init_inputs()` and module-level size
constants. It becomes a task whose inputs are `get_inputs()` under the judge's seeds, whose reference is
`Model` built from `get_init_inputs()` under a fixed seed, and whose sizes are the module's int constants
(the GPU runs them as written; CPU mode scales the large ones down until the inputs are small). A solution
defines `ModelNew`, built with the same seed, so equal architectures get equal weights, as in KernelBench's
own harness. PyTorch operators stay allowed (KernelBench's rules); the result says what share of GPU time
ran in the solution's own kernels, and one with none is flagged (`no_kernel`).

    problem = load("KernelBench/level1/19_ReLU.py")
    result = problem.evaluate(open("my_relu.py").read(), Judge("cpu"))
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
import re
from pathlib import Path

import torch

from kerneldojo.adapters import runtime
from kerneldojo.adapters.common import Problem, SuiteResult, task_id, write_task
from kerneldojo.graders.compile import source_problem

__all__ = ["evaluate_folder", "load", "load_level", "solution_for"]

INIT_SEED = 42  # the weights' seed, for Model and ModelNew alike (fixed: the weights are the solution's own)
# CPU mode: the inputs' elements at the reduced sizes stay under this; sizes below MIN_SCALED are kept.
SMALL_NUMEL = 1 << 16
MIN_SCALED = 16
SMALLEST_SLACK = 64  # where every size is as small as it goes, the inputs may be this many times larger
# Tolerances by dtype: KernelBench's own (src/kernelbench/eval.py, get_tolerance_for_precision), atol = rtol.
TOLERANCE = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2}
FOOTER = """

# ---- appended by kerneldojo.adapters.kernelbench: ModelNew as solution(*inputs, *sizes) ----
import kerneldojo.adapters.runtime as _kd_runtime  # noqa: E402
solution = _kd_runtime.kernelbench_solution(globals(), {sizes!r}, {init!r}, {seed!r})
"""
REFERENCE_FOOTER = """

# ---- appended by kerneldojo.adapters.kernelbench: the problem above as a kerneldojo reference ----
import kerneldojo.adapters.runtime as _kd_runtime  # noqa: E402
make_inputs, reference, flops, bytes_moved = _kd_runtime.kernelbench_reference(globals(), {sizes!r}, {seed!r})
"""


@functools.cache
def _all_aten_ops() -> tuple[str, ...]:
    """Every aten operator torch registers, from the dispatcher: `torch.ops.aten`'s attributes are made as they are
    first touched, so its `dir()` listed what the process had used so far, and an adapted task's allowlist depended
    on the judge's history (red team round 103: without `scaled_dot_product_attention`, an honest problem keeping
    cuBLAS's GEMM was judged `decoy_kernel`)."""
    names = {n.removeprefix("aten::").split(".", 1)[0] for n in torch._C._dispatch_get_all_op_names()
             if n.startswith("aten::")}
    return tuple(sorted(f"aten.{n}" for n in names if re.fullmatch(r"[a-z_]\w*", n)))


def load(path: str | Path, check_degenerate: bool = True) -> Problem:
    """One problem file as a `Problem`; one that cannot run has `task=None` and the reason."""
    path = Path(path)
    problem = Problem("kernelbench", path.stem, path)
    if not path.is_file():
        raise FileNotFoundError(f"no such KernelBench problem file: {path}")
    try:
        _adapt(problem, path.read_text())
    except _Unsupported as e:
        problem.reason = f"{path.name}: {e}"
        return problem
    if check_degenerate:
        from kerneldojo.lint import lint_task

        problem.degenerate = [p for p in lint_task(problem.task) if not p.startswith("shapes.")]
    return problem


def load_level(folder: str | Path, check_degenerate: bool = True) -> list[Problem]:
    """Every problem file of a level folder (KernelBench/level1, ...), numbered order."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"no such KernelBench level folder: {folder}")
    number = (lambda p: int(m[1]) if (m := re.match(r"(\d+)_", p.name)) else 10**9)  # noqa: E731
    files = sorted(folder.glob("*.py"), key=lambda p: (number(p), p.name))
    return [load(p, check_degenerate) for p in files]


def solution_for(problem: Problem, solutions: Path) -> Path | None:
    """A problem's solution in a folder: the same file name, `<n>_*.py`, or KernelBench's run layout
    (`level_1_problem_<n>_sample_0_kernel.py`)."""
    number = problem.name.split("_", 1)[0]
    for pattern in (problem.path.name, f"{number}_*.py", f"*problem_{number}_*.py"):
        if found := sorted(solutions.glob(pattern)):
            return found[0]
    return None


def evaluate_folder(level: str | Path, solutions: str | Path, judge) -> SuiteResult:
    """Each problem of a level folder with its solution from `solutions` (missing: skipped). The solutions'
    load_inline extensions build first, all at once on the judge's cores (`graders.extensions`)."""
    problems = load_level(level)
    sources = {}
    for problem in problems:
        file = solution_for(problem, Path(solutions))
        if file is None:
            problem.reason = problem.reason or f"no solution for {problem.path.name} in {solutions}"
            problem.task = None
        sources[problem.name] = file.read_text() if file else ""
    ahead = [p.wrap(sources[p.name]) for p in problems
             if p.task and "load_inline" in sources[p.name] and not source_problem(sources[p.name])]
    if ahead:
        from kerneldojo.graders.extensions import build_extensions

        build_extensions(ahead, strict=False)
    return SuiteResult({p.name: p.evaluate(sources[p.name], judge) for p in problems})


class _Unsupported(Exception):
    pass


def _named_extensions(source: str) -> str:
    """A load_inline solution with a prelude that names its extensions by content (`runtime.extension_name`)."""
    if "load_inline" not in source:
        return source
    return runtime.with_prelude(source, runtime.EXTENSION_PRELUDE) or f"{runtime.EXTENSION_PRELUDE}\n{source}"


def _adapt(problem: Problem, text: str) -> None:
    ns = _exec(problem.path)
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not callable(ns.get(n))]
    if missing:
        raise _Unsupported(f"not a KernelBench problem: defines no {', '.join(missing)}")
    full = runtime.size_constants(text)
    sizes = list(full)
    small, outputs, inputs = _reduced(ns, sizes, full)
    dtype = next((str(t.dtype).removeprefix("torch.") for t in inputs if t.is_floating_point()), "float32")
    dtype = dtype if dtype in TOLERANCE else "float32"
    init = {tuple(s[k] for k in sizes): _literal(ns, sizes, s) for s in (full, small)}
    names = [p for p in list(inspect.signature(ns["Model"].forward).parameters)[1:]]
    names = names if len(names) == len(inputs) else [f"input{i}" for i in range(len(inputs))]
    spec = {
        "id": task_id("kb", problem.path.parent.name + "_" + problem.path.stem),
        "title": f"KernelBench {problem.path.parent.name}/{problem.path.name}",
        "level": 1,
        "prompt": "Write `class ModelNew(nn.Module)`: the same computation as `Model` in reference.py, faster, with "
                  "your own kernels (Triton, or load_inline CUDA on a GPU). It is built as "
                  "ModelNew(*get_init_inputs()) with the generator at the seed Model gets, and called on get_inputs(). "
                  "PyTorch operators are allowed; the result reports the share of GPU time in your own kernels.",
        "languages": ["triton"], "dtypes": [dtype], "inputs": names,
        "outputs": ["output"] if len(outputs) == 1 else [f"output{i}" for i in range(len(outputs))],
        "shapes": {"test": [full], "bench": [full], "small": [small]},
        "aligned_sizes": sizes, "scalars": sizes, "allowed": list(_all_aten_ops()),
        "tolerance": {dtype: {"atol": TOLERANCE[dtype], "rtol": TOLERANCE[dtype]}},
    }
    reference = text + REFERENCE_FOOTER.format(sizes=sizes, seed=INIT_SEED)
    starter = f"{text}\n\nclass ModelNew(Model):  # a correct start, the reference: replace with kernels\n    pass\n"
    problem.task = write_task(spec, {"reference.py": reference, "starter_triton.py": starter})
    footer = FOOTER.format(sizes=sizes, init=init, seed=INIT_SEED)
    problem.wrap = lambda source: (runtime.BuildsAhead(_named_extensions(source) + footer) if "load_inline" in source
                                   else source + footer)
    if small != full:
        changed = ", ".join(f"{k} {full[k]}->{small[k]}" for k in sizes if small[k] != full[k])
        problem.notes.append(f"CPU mode: run at reduced sizes ({changed}); the GPU runs the problem's own sizes")


def _exec(path: Path) -> dict:
    spec = importlib.util.spec_from_file_location(f"kerneldojo_kernelbench_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise _Unsupported(f"importing it failed: {type(e).__name__}: {e}") from None
    return vars(module)


def _literal(ns: dict, sizes: list[str], values: dict) -> list:
    """get_init_inputs() at these sizes, as literals a solution's footer can hold."""
    runtime.resize(ns, values)
    init = list(ns["get_init_inputs"]())
    try:
        ast.literal_eval(repr(init))
    except (ValueError, SyntaxError):
        raise _Unsupported("get_init_inputs() returns something other than numbers, strings and lists of "
                           f"them: {repr(init)[:80]}") from None
    return init


def _reduced(ns: dict, sizes: list[str], full: dict) -> tuple[dict, tuple, tuple]:
    """The CPU-mode sizes: every size of MIN_SCALED or more divided by the smallest power of two that brings
    the inputs under SMALL_NUMEL elements and still runs (Model's output on real inputs; smaller ones are
    tried when it does not); with them, the outputs and inputs of that run."""
    make_inputs, reference, _, _ = runtime.kernelbench_reference(ns, sizes, INIT_SEED)
    errors, tried = [], []
    for factor in (2**i for i in range(25)):
        shape = {k: max(MIN_SCALED // 2, v // factor) if v >= MIN_SCALED else v for k, v in full.items()}
        if shape in tried:
            if tried[-1] == shape:  # every size is as small as it goes
                break
            continue
        tried.append(shape)
        try:
            numel = _input_numel(ns, sizes, shape)
        except Exception as e:
            raise _Unsupported(f"get_inputs() fails on the meta device: {type(e).__name__}: {e}") from None
        smallest = all(v == (max(MIN_SCALED // 2, f // 2**24) if f >= MIN_SCALED else f)
                       for v, f in zip(shape.values(), full.values()))
        if numel > SMALL_NUMEL * (SMALLEST_SLACK if smallest else 1):  # sizes written into get_inputs stay
            continue
        try:
            inputs = make_inputs(shape, 0, "cpu")
            if not all(isinstance(t, torch.Tensor) for t in inputs):
                raise _Unsupported("get_inputs() returns a non-tensor; kerneldojo passes tensors only")
            out = reference(*inputs, *(shape[k] for k in sizes))
        except _Unsupported:
            raise
        except Exception as e:
            errors.append(f"{type(e).__name__}: {str(e)[:120]}")
            continue
        outputs = out if isinstance(out, tuple) else (out,)
        if not all(isinstance(t, torch.Tensor) for t in outputs):
            raise _Unsupported("Model returns a non-tensor")
        return shape, outputs, inputs
    limit = SMALLEST_SLACK * SMALL_NUMEL
    raise _Unsupported("no reduced size runs on the CPU"
                       + (f" (last: {errors[-1]})" if errors else f": the inputs stay over {limit} elements"))


def _input_numel(ns: dict, sizes: list[str], shape: dict) -> int:
    runtime.resize(ns, {k: shape[k] for k in sizes})
    with torch.device("meta"):
        return sum(t.numel() for t in ns["get_inputs"]() if isinstance(t, torch.Tensor))


