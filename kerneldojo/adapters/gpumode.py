"""GPU MODE reference-kernels problems (gpu-mode/reference-kernels) as kerneldojo tasks.

A problem folder holds `reference.py` (`ref_kernel(data)`, `generate_input(**spec)`, `check_implementation(data,
output)`) and `task.yml` (the files it needs, e.g. `../utils.py`, and `tests` / `benchmarks` as lists of keyword
arguments). It becomes a task whose inputs are the tensors of `generate_input(**test, seed=<the judge's>)`, and
whose verdict is the problem's own `check_implementation`, run in the judge on the output the worker sends back.
A submission defines `custom_kernel(data)`. The references create tensors on "cuda" by name: in CPU mode they
run on the CPU anyway (`runtime.cuda_on_cpu`), at the smallest test.

    problem = load("reference-kernels/problems/pmpp/vectoradd_py")
    result = problem.evaluate(open("submission.py").read(), Judge("cpu"))
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import torch
import yaml

from kerneldojo.adapters import runtime
from kerneldojo.adapters.common import Problem, SuiteResult, task_id, write_task

__all__ = ["evaluate_folder", "load", "load_suite"]

TOLERANCE = {"float32": 1e-5, "float16": 1e-3, "bfloat16": 1e-2}  # unused by the verdict (the problem's own)
SUBMISSION_ONLY = {"submission.py", "eval.py", "reference.py"}  # of task.yml's files: not the reference's helpers
REFERENCE_HEADER = ("import kerneldojo.adapters.runtime as _kd_runtime; _kd_staged = _kd_runtime.staged(__file__, "
                    "{names!r}); _kd_staged.__enter__()  # kerneldojo: this folder's helpers first\n")
REFERENCE_FOOTER = """

# ---- appended by kerneldojo.adapters.gpumode: the problem above as a kerneldojo reference ----
_kd_staged.__exit__(None, None, None)
make_inputs, reference, flops, bytes_moved, check = _kd_runtime.gpumode_reference(globals(), {form!r}, {buffers!r})
unperturbed = {unperturbed!r}  # the output buffers' shapes: not data
"""
# Run before the submission's first statement without moving its lines (`runtime.with_prelude`): the helper
# files' sources are in the footer, which the prelude reads from the file.
SUBMISSION_PRELUDE = "import kerneldojo.adapters.runtime as _kd_runtime; _kd_runtime.provide_appended_modules(__file__)"
SUBMISSION_FOOTER = """

# ---- appended by kerneldojo.adapters.gpumode: custom_kernel(data) as solution(*tensors) ----
_kd_modules = {modules!r}
import kerneldojo.adapters.runtime as _kd_runtime  # noqa: E402
solution = _kd_runtime.gpumode_solution(globals(), {form!r}, {buffers!r})
"""


def load(folder: str | Path) -> Problem:
    """One problem folder as a `Problem`; one that cannot run has `task=None` and the reason."""
    folder = Path(folder)
    if not (folder / "reference.py").is_file() or not (folder / "task.yml").is_file():
        raise FileNotFoundError(f"{folder}: not a GPU MODE problem folder (needs reference.py and task.yml)")
    problem = Problem("gpumode", folder.name, folder)
    try:
        _adapt(problem, folder)
    except _Unsupported as e:
        problem.reason = f"{folder.name}: {e}"
    return problem


def load_suite(folder: str | Path) -> list[Problem]:
    """Every problem folder under `folder` (e.g. problems/pmpp)."""
    return [load(p.parent) for p in sorted(Path(folder).glob("*/task.yml"))]


def evaluate_folder(folder: str | Path, solutions: str | Path, judge) -> SuiteResult:
    """Each problem under `folder` with `solutions/<problem>.py` or `solutions/<problem>/submission.py`."""
    results = {}
    for problem in load_suite(folder):
        file = next((f for f in (Path(solutions) / f"{problem.name}.py",
                                 Path(solutions) / problem.name / "submission.py") if f.is_file()), None)
        if file is None:
            problem.reason, problem.task = problem.reason or f"no solution for {problem.name} in {solutions}", None
        results[problem.name] = problem.evaluate(file.read_text() if file else "", judge)
    return SuiteResult(results)


class _Unsupported(Exception):
    pass


def _adapt(problem: Problem, folder: Path) -> None:
    try:
        config = yaml.safe_load((folder / "task.yml").read_text())
    except yaml.YAMLError as e:
        raise _Unsupported(f"task.yml is not valid YAML: {e}") from None
    helpers = {}
    for entry in config.get("files", []):
        if entry.get("name") in SUBMISSION_ONLY or entry.get("source") == "@SUBMISSION@":
            continue
        source = (folder / entry["source"]).resolve()
        if not source.is_file():
            raise _Unsupported(f"task.yml lists {entry['source']}, which is not there ({source})")
        helpers[entry["name"]] = source.read_text()
    tests, benchmarks = config.get("tests") or [], config.get("benchmarks") or config.get("tests") or []
    if not tests:
        raise _Unsupported("task.yml has no tests")
    sizes = [{k: v for k, v in t.items() if k != "seed"} for t in (*tests, *benchmarks)]
    if bad := [s for s in sizes if not all(isinstance(v, int) for v in s.values())]:
        raise _Unsupported(f"a test passes a non-integer argument ({bad[0]}); kerneldojo's sizes are integers")
    test, bench = sizes[:len(tests)], sizes[len(tests):]
    smallest = min(test, key=lambda s: (math.prod(v for v in s.values() if v > 0), list(s.values())))
    ns = _exec(folder, helpers)
    missing = [n for n in ("ref_kernel", "generate_input", "check_implementation") if not callable(ns.get(n))]
    if missing:
        raise _Unsupported(f"reference.py defines no {', '.join(missing)}")
    with runtime.cuda_on_cpu():
        try:
            data = ns["generate_input"](**smallest, seed=1)
            out = ns["ref_kernel"](data)
        except Exception as e:
            raise _Unsupported(f"the reference does not run on the CPU: {type(e).__name__}: {str(e)[:150]}") from None
    form = "tensor" if isinstance(data, torch.Tensor) else "list" if isinstance(data, list) else "tuple"
    inputs = (data,) if form == "tensor" else data
    if not isinstance(inputs, (tuple, list)) or not all(isinstance(t, torch.Tensor) for t in inputs):
        raise _Unsupported(f"generate_input returns a {type(data).__name__} holding more than tensors; kerneldojo "
                           "passes tensors only")
    outputs = out if isinstance(out, (tuple, list)) else (out,)
    # pmpp_v2's form: `data` carries the output buffer that ref_kernel fills and returns. The worker gets its
    # shape and dtype alone (`runtime.buffer_descriptor`) and custom_kernel a fresh buffer: inputs stay unchanged.
    buffers = {i: str(t.dtype).removeprefix("torch.") for i, t in enumerate(inputs) if any(o is t for o in outputs)}
    if len(buffers) == len(inputs):
        raise _Unsupported("every tensor of `data` is an output buffer ref_kernel writes; there is no input")
    dtype = next((str(t.dtype).removeprefix("torch.") for i, t in enumerate(inputs)
                  if t.is_floating_point() and i not in buffers), "float32")
    dtype = dtype if dtype in TOLERANCE else "float32"
    names = [n.removesuffix(".py") for n in helpers if n.endswith(".py")]
    spec = {
        "id": task_id("gm", f"{folder.parent.name}_{folder.name}"),
        "title": f"GPU MODE {folder.parent.name}/{folder.name}",
        "level": 1,
        "prompt": (config.get("description") or folder.name).strip() + "\n\nSubmit a Python file that defines "
                  "`custom_kernel(data)`, data as reference.py's generate_input makes it.",
        "languages": ["triton"], "dtypes": [dtype], "inputs": [f"data{i}" for i in range(len(inputs))],
        "outputs": ["output"] if len(outputs) == 1 else [f"output{i}" for i in range(len(outputs))],
        "shapes": {"test": test, "bench": bench, "small": [smallest]},
        "aligned_sizes": sorted({k for s in sizes for k in s}), "allowed": _all_ops(),
        "tolerance": {dtype: {"atol": TOLERANCE[dtype], "rtol": TOLERANCE[dtype]}},
    }
    if (lang := config.get("lang", "py")) != "py":
        raise _Unsupported(f"task.yml says lang: {lang!r}; kerneldojo runs GPU MODE's Python problems (lang: py) "
                           "only: submit CUDA through load_inline in a Python submission")
    reference = (REFERENCE_HEADER.format(names=names) + (folder / "reference.py").read_text()
                 + REFERENCE_FOOTER.format(form=form, buffers=buffers, unperturbed=tuple(sorted(buffers))))
    template = next((folder / t for t in (config.get("templates") or {}).values() if (folder / t).is_file()), None)
    starter = template.read_text() if template else "def custom_kernel(data):\n    raise NotImplementedError\n"
    problem.task = write_task(spec, {**helpers, "reference.py": reference, "starter_triton.py": starter})
    modules = {n.removesuffix(".py"): text for n, text in helpers.items() if n.endswith(".py")}
    footer = SUBMISSION_FOOTER.format(modules=modules, form=form, buffers=buffers)
    problem.wrap = lambda source: (runtime.with_prelude(source, SUBMISSION_PRELUDE)
                                   or f"{source}\n{SUBMISSION_PRELUDE}") + footer
    problem.notes.append(f"CPU mode: the reference's 'cuda' tensors made on the CPU, at the smallest test {smallest}")


def _all_ops() -> list[str]:
    from kerneldojo.adapters.kernelbench import _all_aten_ops

    return list(_all_aten_ops())


def _exec(folder: Path, helpers: dict[str, str]) -> dict:
    """reference.py, importing its helpers from the files task.yml names (as the suite's runner lays them out)."""
    runtime.provide_modules({n.removesuffix(".py"): t for n, t in helpers.items() if n.endswith(".py")})
    spec = importlib.util.spec_from_file_location(f"kerneldojo_gpumode_{folder.name}", folder / "reference.py")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise _Unsupported(f"importing reference.py failed: {type(e).__name__}: {e}") from None
    finally:
        for name in helpers:
            sys.modules.pop(name.removesuffix(".py"), None)
    return vars(module)
