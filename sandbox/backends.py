"""Where a submission runs, by name: the backends a `Judge(isolation=...)` picks from.

    "process"  a single-use worker process, confined (`sandbox.process`, `sandbox.worker`): the default
    "docker"   a single-use container (`sandbox.docker`)
    "none"     the judge's own process (`sandbox.worker.harness.Solution`): worker code runs in the
               judge by design, with nothing contained; for debugging and trusted code only

Each opens a `protocol.SubmissionHandle` on a built submission.
"""

from __future__ import annotations

from typing import Protocol

from kerneldojo.tasks import Task

from .device import Device
from .docker import DockerConfig, DockerSolution
from .process import WorkerSolution
from .protocol import Build, SubmissionHandle
from .worker.harness import Solution


class Backend(Protocol):
    def __call__(self, task: Task, build: Build, device: Device, limits: dict[str, float] | None,
                 docker: DockerConfig | None) -> SubmissionHandle: ...


BACKENDS: dict[str, Backend] = {
    "process": lambda task, build, device, limits, docker: WorkerSolution(task, build, device, limits),
    "docker": lambda task, build, device, limits, docker: DockerSolution(task, build, device, limits, docker),
    "none": lambda task, build, device, limits, docker: Solution(task, build, device),
}


def check_isolation(isolation: str) -> None:
    if isolation not in BACKENDS:
        raise ValueError(f"isolation must be one of {', '.join(map(repr, BACKENDS))} (kerneldojo.sandbox.backends), "
                         f"not {isolation!r}")
