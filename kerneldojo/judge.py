"""The path of one evaluation, top to bottom: compile, load, check, time, score.

The judge draws the seeds, makes the inputs, runs the reference and compares; only
`sandbox.runner.Solution` touches submission code, inside a single-use worker process
(`sandbox.process`) unless isolation="none".
"""

from __future__ import annotations

import functools
import math
import platform
import secrets
import time

import torch

import kerneldojo
from kerneldojo.graders.checks import ForbiddenOps
from kerneldojo.graders.compile import (
    CompileError,
    check_language,
    compile_submission,
    detect_language,
    nvcc_version,
)  # fmt: skip
from kerneldojo.graders.correctness import (
    WrongOutput,
    check_inputs_unchanged,
    check_outputs,
    poisoned_like,
)  # fmt: skip
from kerneldojo.graders.reward import RewardConfig
from kerneldojo.graders.roofline import floor_ms, measured_peaks
from kerneldojo.graders.timing import time_calls
from kerneldojo.result import CaseTiming, EvalResult, TimeStats, Versions
from kerneldojo.sandbox.device import Device, resolve_device, synchronize
from kerneldojo.sandbox.docker import DockerConfig, DockerSolution
from kerneldojo.sandbox.process import SubmissionTimeout, WorkerSolution
from kerneldojo.sandbox.runner import Solution, SubmissionError
from kerneldojo.tasks import Case, Task, get_task

CPU_MODE_NOTE = "CPU mode: checked with the Triton interpreter at the `small` shapes; nothing was timed, so no speedup"
TIMING_INPUT_SETS = 3  # calls rotate over this many input sets, so no result can be cached by pointer


class Judge:
    """Evaluates submissions on one device. Keeps reference timings between evaluations."""

    def __init__(
        self,
        device: str | None = "auto",
        reward: RewardConfig | None = None,
        seeds: int = 3,
        time_compiled_reference: bool = True,
        timing_budget_s: float = 2.0,
        timed: bool = True,
        isolation: str = "process",
        limits: dict[str, float] | None = None,
        docker: DockerConfig | None = None,
    ):
        if isolation not in ("process", "docker", "none"):
            raise ValueError("isolation must be 'process' (a worker per submission), 'docker' (a container per "
                             f"submission) or 'none', not {isolation!r}")
        self.device: Device = resolve_device(device)
        self.reward = reward or RewardConfig()
        self.seeds = seeds
        self.time_compiled_reference = time_compiled_reference
        self.timing_budget_s = timing_budget_s
        self.timed = timed and self.device.mode == "gpu"
        self.isolation = isolation
        self.limits = limits  # wall-clock seconds per worker request: load, run, time
        self.docker = docker  # isolation='docker': image, runtime, limits (default: DockerConfig())
        self._reference_times: dict[tuple[str, str, str], TimeStats | None] = {}

    def evaluate(self, task: Task | str, source: str, language: str | None = None) -> EvalResult:
        started = time.perf_counter()
        task = get_task(task) if isinstance(task, str) else task
        language = language or detect_language(source)
        check_language(task, language)
        result = EvalResult(
            task=task.id, language=language, device=self.device.name, mode=self.device.mode,
            status="ok", versions=versions(),
        )  # fmt: skip
        try:
            self._grade(task, source, language, result)
        except CompileError as e:
            result.status, result.messages = "compile_error", [*result.messages, str(e)]
        except SubmissionTimeout as e:
            result.status, result.messages = "timeout", [*result.messages, str(e)]
        except SubmissionError as e:
            result.status, result.messages = "runtime_error", [*result.messages, str(e)]
        except WrongOutput as e:
            result.status, result.mismatch = "wrong", e.mismatch
            result.messages.append(str(e))
            if e.mismatch:
                result.max_abs_error = e.mismatch.max_abs_error
        except Exception as e:  # a CUDA error surfacing at a synchronize, a bad return value, ...
            result.status = "runtime_error"
            result.messages.append(f"{type(e).__name__}: {e}")
        result.reward = self.reward(result.status, result.speedup)
        result.wall_s = time.perf_counter() - started
        return result

    def _grade(self, task: Task, source: str, language: str, result: EvalResult) -> None:
        t0 = time.perf_counter()
        build = compile_submission(task, source, language, self.device.arch)
        result.compile_s = time.perf_counter() - t0
        if build.libraries and self.device.mode == "cpu":
            result.status = "compiled"
            result.messages.append(f"compiled for sm_{self.device.arch}; not run: CPU mode has no GPU")
            return
        if self.isolation == "process":
            solution = WorkerSolution(task, build, self.device, self.limits)
        elif self.isolation == "docker":
            solution = DockerSolution(task, build, self.device, self.limits, self.docker)
        else:
            solution = Solution(task, build, self.device)
        try:
            self._check(task, solution, result)
            if result.status == "ok" and self.timed:
                self._time(task, solution, result)
        finally:
            solution.close()
        if self.device.mode == "cpu":
            result.messages.append(CPU_MODE_NOTE)

    def _check(self, task: Task, solution: Solution, result: EvalResult) -> None:
        cases = task.cases("small" if self.device.mode == "cpu" else "test")
        seeds = [secrets.randbits(31) for _ in range(self.seeds)]
        worst = 0.0
        for case in cases:
            for seed in seeds:
                inputs = task.reference.make_inputs(case.shape, seed, self.device.torch_device)
                pristine = tuple(t.clone() for t in inputs)
                expected = task.expected(*pristine)
                got = solution.run(inputs, case.shape, poisoned_like(expected))
                synchronize(self.device)
                check_inputs_unchanged(pristine, inputs, str(case))
                worst = max(worst, check_outputs(got, expected, task.tolerance(case.dtype), str(case)))
                result.cases_checked += 1
        result.max_abs_error = worst
        if solution.forbidden_called:
            result.status = "flagged"
            result.checks_fired.append(ForbiddenOps.name)
            result.messages.append(ForbiddenOps.message_for(solution.forbidden_called))

    def _time(self, task: Task, solution: Solution, result: EvalResult) -> None:
        peaks = measured_peaks(self.device.torch_device)
        for case in task.cases("bench"):
            shape = case.shape
            arg_sets = [task.reference.make_inputs(shape, secrets.randbits(31), self.device.torch_device)
                        for _ in range(TIMING_INPUT_SETS)]
            output_sets = [poisoned_like(task.expected(*a)) for a in arg_sets]
            stats = solution.time(arg_sets, shape, output_sets, self.device.l2_bytes, self.timing_budget_s)
            flops, moved = task.reference.flops(shape), task.reference.bytes_moved(shape)
            result.timings.append(CaseTiming(
                case=str(case), submission=stats,
                eager=self._reference_time(task, case, "eager", arg_sets),
                compiled=self._reference_time(task, case, "compiled", arg_sets),
                floor_ms=floor_ms(flops, moved, case.dtype, peaks),
            ))  # fmt: skip
            del arg_sets, output_sets
        result.timed = True
        result.speedup = _geomean([t.speedup for t in result.timings])
        result.speedup_vs_compile = _geomean([t.speedup_vs_compile for t in result.timings])
        result.roofline_fraction = _geomean([t.roofline_fraction for t in result.timings])

    def _reference_time(self, task: Task, case: Case, kind: str, arg_sets: list) -> TimeStats | None:
        key = (task.id, str(case), kind)
        if key not in self._reference_times:
            if kind == "compiled" and not self.time_compiled_reference:
                return None
            try:
                fn = task.reference.reference if kind == "eager" else _compiled_reference(task.id)
                self._reference_times[key] = self._time_calls([functools.partial(fn, *a) for a in arg_sets])
            except Exception:  # torch.compile can fail on a platform; the eager figure still stands
                self._reference_times[key] = None
        return self._reference_times[key]

    def _time_calls(self, calls) -> TimeStats:
        return time_calls(calls, self.device.torch_device, self.device.l2_bytes, budget_s=self.timing_budget_s)


@functools.cache
def _compiled_reference(task_id: str):
    return torch.compile(get_task(task_id).reference.reference)


def _geomean(values: list[float | None]) -> float | None:
    if not values or any(v is None or v <= 0 for v in values):
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


@functools.cache
def versions() -> Versions:
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    driver = None
    if torch.cuda.is_available():
        try:
            import pynvml

            pynvml.nvmlInit()
            driver = pynvml.nvmlSystemGetDriverVersion()
        except Exception:
            driver = None
    return Versions(
        kerneldojo=kerneldojo.__version__, python=platform.python_version(), torch=torch.__version__,
        triton=triton_version, nvcc=nvcc_version(), cuda_driver=driver,
    )  # fmt: skip


@functools.cache
def default_judge(device: str | None = "auto") -> Judge:
    return Judge(device)
