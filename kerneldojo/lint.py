"""The task linter: properties every task must have before agents train on it.

    kerneldojo lint [TASK ...]
"""

from __future__ import annotations

import secrets

import torch

from kerneldojo.graders.roofline import datasheet_peaks, floor_ms
from kerneldojo.tasks import Task

# A benchmark size must keep an H100 busy for this long at the roofline, or launch overhead dominates.
MIN_BENCH_FLOOR_MS = 0.01
ALIGNMENT = 16
# Seeds besides the first that the dependence checks try: two draws of a scalar input (fp8_gemm's
# scales) fall within the tolerance of each other about 3 % of the time, so one pair made the
# linter fail on sound tasks.
OTHER_SEEDS = 3


def lint_task(task: Task) -> list[str]:
    """Problems with the task's own definition (reference, shapes); empty when it is sound."""
    return [*_reference_problems(task), *_shape_problems(task)]


def lint_solutions(task: Task, judge, repeat: int = 1) -> list[str]:
    """The shipped starters and baselines must pass (CPU mode: Triton runs, CUDA compiles), in each of
    `repeat` evaluations on fresh seeds: a failure in some of them only is a seed-dependent one, which
    points at the reference or the tolerance rather than the kernel."""
    from kerneldojo.baselines import shipped_solutions

    problems = []
    sources = {f"starter_{lang}": (lang, task.starter(lang)) for lang in task.spec.languages}
    sources |= {f"baseline {lang}": (lang, p.read_text()) for lang, p in shipped_solutions(task.id).items()}
    if not any(lang in shipped_solutions(task.id) for lang in task.spec.languages):
        problems.append(f"no baseline in baselines/<task>/ for any of the task's languages {task.spec.languages}")
    for name, (language, source) in sources.items():
        passing = ("ok",) if judge.device.mode == "gpu" or language in ("triton", "python") else ("compiled",)
        results = [judge.evaluate(task, source, language, retime=True) for _ in range(repeat)]  # never reused
        failures = [r for r in results if r.status not in passing]
        if failures:
            times = f" in {len(failures)} of {repeat} evaluations" if repeat > 1 else ""
            problems.append(f"{name}: {failures[0].status}{times}: {' | '.join(failures[0].messages)[:300]}")
    return problems


def _reference_problems(task: Task) -> list[str]:
    ref, problems = task.reference, []
    device = torch.device("cpu")
    largest_small = task.spec.shapes.small[-1]
    for case in (c for c in task.cases("small") if dict(c.sizes) == largest_small):
        shape, tol = case.shape, task.tolerance(case.dtype)
        seed_a = secrets.randbits(31)
        inputs_a = ref.make_inputs(shape, seed_a, device)
        others = [ref.make_inputs(shape, secrets.randbits(31), device) for _ in range(OTHER_SEEDS)]
        if len(inputs_a) != len(task.spec.inputs):
            return [f"make_inputs returns {len(inputs_a)} tensors; task.toml names {len(task.spec.inputs)} inputs"]
        again = ref.make_inputs(shape, seed_a, device)
        if any(not torch.equal(x, y) for x, y in zip(inputs_a, again)):
            problems.append(f"{case}: make_inputs gives different inputs for the same seed; draw from a generator "
                            "seeded with `seed`")
            continue
        if all(torch.equal(x, y) for x, y in zip(inputs_a, others[0])):
            problems.append(f"{case}: make_inputs ignores `seed`; two seeds gave the same inputs")
            continue
        out_a = task.expected(*inputs_a, shape=shape)
        if len(out_a) != len(task.spec.outputs):
            return [f"reference returns {len(out_a)} outputs; task.toml names {len(task.spec.outputs)}"]
        if hasattr(ref, "expected") and _differs(out_a, _as_tuple(ref.reference(*inputs_a, *task.scalars(shape))), tol):
            problems.append(f"{case}: expected() and reference() disagree beyond the tolerance; the timed "
                            "baseline must compute what submissions are checked against")
        if not any(_differs(out_a, task.expected(*other, shape=shape), tol) for other in others):
            problems.append(f"{case}: reference gives the same output for {1 + OTHER_SEEDS} seeds")
        for i, name in enumerate(task.spec.inputs):
            mixes = (tuple(other[j] if j == i else t for j, t in enumerate(inputs_a)) for other in others)
            if not any(_differs(out_a, task.expected(*mixed, shape=shape), tol) for mixed in mixes):
                problems.append(f"{case}: the output does not depend on input {name!r}")
        for name, out in zip(task.spec.outputs, out_a):
            if out.numel() > 1 and float(out.double().max() - out.double().min()) <= tol.atol:
                problems.append(f"{case}: output {name!r} is near-constant")
        if ref.flops(shape) < 0 or ref.bytes_moved(shape) <= 0:
            problems.append(f"{case}: flops must be >= 0 and bytes_moved > 0")
    return problems


def _shape_problems(task: Task) -> list[str]:
    problems = []
    sizes = set().union(*(s.keys() for s in task.spec.shapes.test))
    for size in sorted(sizes - set(task.spec.aligned_sizes)):
        if all(s.get(size, 0) % ALIGNMENT == 0 for s in task.spec.shapes.test):
            problems.append(f"shapes.test: every {size} is a multiple of {ALIGNMENT}; add an awkward one")
    peaks = datasheet_peaks("H100")
    for case in task.cases("bench"):
        floor = floor_ms(task.reference.flops(case.shape), task.reference.bytes_moved(case.shape), case.dtype, peaks)
        if floor is not None and floor < MIN_BENCH_FLOOR_MS:
            problems.append(f"shapes.bench: {case} takes {1e3 * floor:.1f} us at the H100 roofline, under the "
                            f"{1e3 * MIN_BENCH_FLOOR_MS:.0f} us minimum; make it larger")
    return problems


def _as_tuple(out) -> tuple:
    return out if isinstance(out, tuple) else (out,)


def _differs(a: tuple, b: tuple, tol) -> bool:
    for x, y in zip(a, b):
        if x.shape != y.shape:
            return True
        x, y = x.double(), y.double()
        if ((x - y).abs() > tol.atol + tol.rtol * y.abs()).any():
            return True
    return False
