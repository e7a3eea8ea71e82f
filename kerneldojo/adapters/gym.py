"""`gymnasium.make("kerneldojo/kernelbench-v0", problem=PATH)` and `"kerneldojo/gpumode-v0"`: a `KernelEnv` on one
problem of the suite, whose actions are solutions in the suite's own form (ModelNew, custom_kernel)."""

from __future__ import annotations

from pathlib import Path

from kerneldojo.env.kernel_env import KernelEnv
from kerneldojo.result import EvalResult


class SuiteEnv(KernelEnv):
    """`KernelEnv`'s observation, reward and episode rules; `suite` is "kernelbench" or "gpumode", `problem` a
    problem file (KernelBench) or folder (GPU MODE) of the user's checkout; other arguments as `KernelEnv`."""

    def __init__(self, suite: str, problem: str | Path, **kwargs):
        from kerneldojo.adapters.cli import _module

        self.problem = _module(suite).load(problem)
        if self.problem.task is None:
            raise ValueError(f"{problem} cannot run under kerneldojo: {self.problem.reason}")
        super().__init__(task=self.problem.task, language="python", **kwargs)

    def _evaluate(self, source: str) -> EvalResult:
        return self.problem.evaluate(source, self.judge)
