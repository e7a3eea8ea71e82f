"""The judges as Ray actors (in the judge's process, the driver): the GPUPool's interface over a Ray cluster.

One `JudgeActor` per GPU of the cluster (each holds `num_gpus=1`, so Ray sets its CUDA_VISIBLE_DEVICES
and it judges on `cuda:0`), or CPU slots in CPU mode (`num_cpus=1` each). CUDA/CuTe sources are built
by `nvcc` in Ray tasks on CPU workers before they queue for an actor; a compile error is answered
there and never takes an actor. An actor that dies (its node lost, its process killed) is restarted
and the evaluation it was running is retried (`max_restarts`, `max_task_retries`); one that is gone
for good hands its job back to the queue, so another actor redoes it. Results come back as the same
`EvalResult`, so `run_batch` stores them as it stores the local pool's.

    with RayPool("auto", address="ray://head:10001") as pool:   # or None: start or join a local Ray
        summary = run_batch(subs, "results.jsonl", pool)
"""

from __future__ import annotations

import concurrent.futures as cf
import queue
import threading
import time
from dataclasses import dataclass
from types import SimpleNamespace

from kerneldojo.graders.reward import RewardConfig
from kerneldojo.result import EvalResult

from .pool import NATIVE_LANGUAGES, SubmittingPool, compile_error_result

MAX_RESTARTS = 3


def _ray():
    try:
        import ray
    except ImportError:
        raise RuntimeError("the ray backend needs Ray: pip install 'kerneldojo[ray]'") from None
    return ray


class JudgeActor:
    """One judge on one device of a Ray node (made a Ray actor by RayPool)."""

    def __init__(self, device: str, judge_kwargs: dict):
        import socket

        from kerneldojo.judge import Judge

        self.judge = Judge(device, **judge_kwargs)
        self.name = f"{socket.gethostname()}/{device}"

    def describe(self) -> dict:
        d = self.judge.device
        return {"name": self.name, "arch": d.arch, "device": d.name, "mode": d.mode}

    def evaluate(self, task: str, source: str, language: str, retime: bool = False) -> dict:
        return self.judge.evaluate(task, source, language, retime=retime).model_dump(mode="json")

    def pid(self) -> int:
        import os

        return os.getpid()


def _compile(task_id: str, source: str, language: str, arch: str) -> str | None:
    """A Ray task on a CPU worker: build the source into that node's cache; the compile error's text, if any."""
    from kerneldojo.graders.compile import compile_submission
    from kerneldojo.sandbox.protocol import CompileError
    from kerneldojo.tasks import get_task

    try:
        compile_submission(get_task(task_id), source, language, arch)
    except CompileError as e:
        return str(e)
    return None


@dataclass
class _Job:
    task: str
    source: str
    language: str
    future: cf.Future
    compile_s: float = 0.0
    retime: bool = False


class RayPool(SubmittingPool):
    """Evaluates submissions on judge actors of a Ray cluster; the interface of `GPUPool`.

    `devices`: "auto" (a slot per GPU of the cluster, else CPU slots), "gpu", "cpu" (half the
    cluster's CPUs, at most 8: the rest compile) or "cpu:N". `address` is passed to `ray.init`.
    """

    def __init__(self, devices: str | None = "auto", *, address: str | None = None, compile_workers: int | None = None,
                 **judge_kwargs):  # fmt: skip
        ray = _ray()
        self._ray = ray
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
        resources = ray.cluster_resources()
        gpus, cpus = int(resources.get("GPU", 0)), int(resources.get("CPU", 1))
        devices = (devices or "auto").strip()
        if devices in ("auto", "gpu") and gpus:
            count, device, need = gpus, "cuda:0", {"num_gpus": 1}
        elif devices == "gpu":
            raise ValueError("devices='gpu': the Ray cluster has no GPU")
        elif devices in ("auto", "cpu") or devices.startswith("cpu:"):
            count = int(devices[4:]) if devices.startswith("cpu:") else max(1, min(cpus // 2, 8))
            device, need = "cpu", {"num_cpus": 1}
        else:
            raise ValueError(f"RayPool devices: expected auto, gpu, cpu or cpu:N, got {devices!r}")
        actor = ray.remote(max_restarts=MAX_RESTARTS, max_task_retries=MAX_RESTARTS, **need)(JudgeActor)
        self._actors = [actor.remote(device, judge_kwargs) for _ in range(count)]
        self.slots = ray.get([a.describe.remote() for a in self._actors])
        self._compile_task = ray.remote(num_cpus=1, max_retries=MAX_RESTARTS)(_compile)
        self._reward = judge_kwargs.get("reward") or RewardConfig()
        self._archs = list(dict.fromkeys(s["arch"] for s in self.slots))
        self.compile_workers = compile_workers or max(1, cpus)
        self._compile = cf.ThreadPoolExecutor(self.compile_workers, thread_name_prefix="kerneldojo-ray-compile")
        self._runs: queue.Queue[_Job | None] = queue.Queue()
        self._alive = len(self._actors)
        self._lock = threading.Lock()
        self._closed = False
        self._threads = [threading.Thread(target=self._serve, args=(a, s["name"]), daemon=True,
                                          name=f"kerneldojo-ray-{i}") for i, (a, s) in enumerate(zip(self._actors,
                                                                                                  self.slots))]
        for thread in self._threads:
            thread.start()

    def __len__(self) -> int:
        return len(self._actors)

    def describe(self) -> str:
        names = ", ".join(s["name"] for s in self.slots)
        plural = "s" if len(self) != 1 else ""
        return f"{len(self)} Ray judge actor{plural} ({names}), {self.compile_workers} compile tasks"

    @property
    def actors(self) -> list:
        return list(self._actors)

    def submit(self, task: str, source: str, language: str | None = None, retime: bool = False) -> cf.Future:
        """A Future of the EvalResult. Raises at once for an unknown task or a language it does not take."""
        from kerneldojo.graders.compile import check_language, detect_language
        from kerneldojo.tasks import get_task

        task_obj = get_task(task)
        language = language or detect_language(source)
        check_language(task_obj, language)
        with self._lock:
            if self._closed:
                raise RuntimeError("the pool is closed")
        job = _Job(task_obj.id, source, language, cf.Future(), retime=retime)
        self._compile.submit(self._prepare, job)
        return job.future

    def _window(self) -> int:
        return 2 * (len(self) + self.compile_workers)

    def close(self, wait: bool = True) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._compile.shutdown(wait=wait, cancel_futures=not wait)
        for _ in self._threads:
            self._runs.put(None)
        if wait:
            for thread in self._threads:
                thread.join()
        for actor in self._actors:
            self._ray.kill(actor, no_restart=True)

    def _prepare(self, job: _Job) -> None:
        """Compile stage: build native sources in Ray tasks on CPU workers, one per arch of the actors."""
        if job.language in NATIVE_LANGUAGES:
            started = time.perf_counter()
            try:
                errors = self._ray.get([self._compile_task.remote(job.task, job.source, job.language, arch)
                                        for arch in self._archs])  # fmt: skip
            except Exception:  # the actor's own compile step meets it again and reports it
                errors = []
            job.compile_s = time.perf_counter() - started
            for arch, error in zip(self._archs, errors):
                if error is not None:
                    slot = next(s for s in self.slots if s["arch"] == arch)
                    judge = SimpleNamespace(device=SimpleNamespace(name=slot["device"], mode=slot["mode"]),
                                            reward=self._reward)  # fmt: skip
                    job.future.slot = None
                    job.future.set_result(compile_error_result(judge, job, error, job.compile_s))
                    return
        self._runs.put(job)

    def _serve(self, actor, name: str) -> None:
        """One thread per actor: one evaluation at a time on it; its job goes back to the queue if it dies."""
        while True:
            job = self._runs.get()
            if job is None:
                return
            try:
                record = self._ray.get(actor.evaluate.remote(job.task, job.source, job.language, job.retime))
            except self._ray.exceptions.RayActorError:  # gone for good (restarts spent): another actor redoes it
                with self._lock:
                    self._alive -= 1
                    last = self._alive == 0
                if last:
                    job.future.set_exception(RuntimeError("every Ray judge actor died"))
                    self._fail_queued()
                else:
                    self._runs.put(job)
                return
            except BaseException as e:  # the judge itself failed in the actor
                job.future.slot = name
                job.future.set_exception(e)
                continue
            result = EvalResult.model_validate(record)
            result.compile_s += job.compile_s
            result.wall_s += job.compile_s
            job.future.slot = name
            job.future.set_result(result)

    def _fail_queued(self) -> None:
        while True:
            try:
                job = self._runs.get_nowait()
            except queue.Empty:
                return
            if job is not None:
                job.future.set_exception(RuntimeError("every Ray judge actor died"))

