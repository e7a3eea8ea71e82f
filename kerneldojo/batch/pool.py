"""The GPU pool (in the judge's process): many submissions over the GPUs of one host, one judge per GPU.

N GPUs give N × `workers_per_gpu` slots. A slot owns one `Judge` (which caches reference timings for
its device) and one thread. Several slots of one GPU check correctness at the same time, but a GPU's
timing phases (the submission's timed runs and profile, a reference's timing) hold it exclusively: a
per-GPU read-write lock (`sandbox.gpu_lock`, taken by every `Judge`, across processes too) that correctness
checks share and timing takes alone, so timings still see an idle device. A hang or a crash costs its own
slot's worker only.
Compilation is CPU work and overlaps: CUDA/CuTe sources are built by `nvcc` on a
thread pool sized to the CPU cores before they queue for a slot, so a slot is not held while
`nvcc` runs (the judge's own compile step then hits the build cache). A compile error is
answered from the compile stage and never takes a slot. Triton/Python "compilation" is a
syntax check (Triton builds its kernels at the first launch, inside the worker), so it
happens in the slot.

Devices: every GPU torch sees (CUDA_VISIBLE_DEVICES applies: `cuda:0` is its first entry), or
an explicit list such as `["cuda:0", "cuda:2"]` or "0,2". Without a GPU the pool has CPU
slots (`"cpu"`: min(cores, 8); `"cpu:N"`: N), which run the Triton interpreter, so CI
exercises the same code.

    with GPUPool("all") as pool:
        future = pool.submit("softmax", source)            # Future[EvalResult]
        for outcome in pool.imap_unordered(jobs): ...       # jobs: (tag, (task, source, language))
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from kerneldojo.graders.compile import TransientCompileError, check_language, compile_submission, detect_language
from kerneldojo.judge import Judge, versions
from kerneldojo.result import EvalResult
from kerneldojo.sandbox.protocol import CompileError, Unavailable
from kerneldojo.tasks import get_task

from .store import submission_hash

NATIVE_LANGUAGES = ("cuda", "cute")  # built by nvcc in the compile stage
MAX_DEFAULT_CPU_SLOTS = 8  # each CPU slot keeps a worker process with torch imported


def cpu_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def visible_gpu_count() -> int:
    """GPUs torch can use here: CUDA_VISIBLE_DEVICES already applied."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def cuda_visible_devices(environ: dict[str, str] | None = None) -> list[str] | None:
    """The entries of CUDA_VISIBLE_DEVICES as the driver reads them, or None when unset.

    Entries are indices or GPU-/MIG- UUIDs, comma-separated; the driver stops at the first
    invalid one (a negative index hides that entry and every one after it, so "-1" hides all).
    """
    value = (os.environ if environ is None else environ).get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    entries = []
    for entry in (e.strip() for e in value.split(",")):
        if not entry or entry.startswith("-"):
            break
        entries.append(entry)
    return entries


@dataclass(frozen=True)
class SlotSpec:
    device: str  # what the slot's Judge gets: "cuda:1" or "cpu"
    physical: str | None = None  # for GPUs: the CUDA_VISIBLE_DEVICES entry (or the index) behind it

    def __str__(self) -> str:
        if self.physical is None or self.physical == self.device.removeprefix("cuda:"):
            return self.device
        return f"{self.device} (GPU {self.physical})"


def parse_devices(
    spec: str | Iterable[str] | None = "auto",
    cpu_slots: int | None = None,
    environ: dict[str, str] | None = None,
) -> list[SlotSpec]:
    """One SlotSpec per slot, from a comma-separated string or a list of tokens:

    "auto" (every GPU, else CPU slots), "all" (every GPU), "cuda" (= cuda:0), "cuda:N" or "N"
    (GPU N as torch numbers them, i.e. after CUDA_VISIBLE_DEVICES), "cpu" alone (`cpu_slots`
    slots, default min(cores, 8)), "cpu:N" (N slots), or "cpu" repeated (one slot each).
    """
    tokens = [t.strip() for t in (spec or "auto").split(",")] if isinstance(spec, str) or spec is None else [
        str(t).strip() for t in spec]  # fmt: skip
    tokens = [t for t in tokens if t]
    if not tokens:
        raise ValueError("no devices given")
    count = visible_gpu_count()
    visible = cuda_visible_devices(environ)
    default_cpu = cpu_slots or max(1, min(cpu_cores(), MAX_DEFAULT_CPU_SLOTS))

    def gpu(index: int) -> SlotSpec:
        if not 0 <= index < count:
            seen = f"{count} GPU{'s' if count != 1 else ''} visible"
            if visible is not None:
                seen += f" (CUDA_VISIBLE_DEVICES={','.join(visible)})"
            raise ValueError(f"device cuda:{index} asked for, but torch sees {seen}; GPUs are numbered from 0 "
                             "after CUDA_VISIBLE_DEVICES")  # fmt: skip
        physical = visible[index] if visible is not None and index < len(visible) else str(index)
        return SlotSpec(f"cuda:{index}", physical)

    slots: list[SlotSpec] = []
    for token in tokens:
        low = token.lower()
        if low == "auto":
            slots += [gpu(i) for i in range(count)] if count else [SlotSpec("cpu")] * default_cpu
        elif low in ("all", "gpus"):
            if not count:
                raise ValueError(f"devices {token!r} asked for every GPU, but torch sees none; use 'cpu'")
            slots += [gpu(i) for i in range(count)]
        elif low == "cpu":
            slots += [SlotSpec("cpu")] * (default_cpu if len(tokens) == 1 else 1)
        elif low.startswith("cpu:") and low[4:].isdigit() and int(low[4:]) > 0:
            slots += [SlotSpec("cpu")] * int(low[4:])
        elif low == "cuda":
            slots.append(gpu(0))
        elif low.startswith("cuda:") and low[5:].isdigit():
            slots.append(gpu(int(low[5:])))
        elif low.isdigit():
            slots.append(gpu(int(low)))
        else:
            raise ValueError(f"device {token!r} is not auto, all, cpu, cpu:N, cuda, cuda:N or N")
    gpus = [s.device for s in slots if s.device != "cpu"]
    if gpus and len(gpus) != len(slots):
        raise ValueError("devices mix CPU and GPU slots; a batch runs either on the GPUs or in CPU mode")
    twice = sorted({d for d in gpus if gpus.count(d) > 1})
    if twice:
        raise ValueError(f"{', '.join(twice)} listed twice; a GPU is one slot (one timed run at a time)")
    return slots


class Slot:
    """One device and the judge that owns it."""

    def __init__(self, spec: SlotSpec, judge):
        self.spec, self.judge = spec, judge
        self.evaluations = 0

    @property
    def name(self) -> str:
        return str(self.spec)


class Outcome(NamedTuple):
    tag: Any
    result: EvalResult | None
    error: BaseException | None  # the judge itself failed (not the submission): nothing to record
    slot: str | None  # which slot evaluated it; None when the compile stage answered


@dataclass
class _Job:
    task: str
    source: str
    language: str
    key: str
    future: cf.Future
    compile_s: float = 0.0
    queued_at: float = 0.0
    retime: bool = False


class SubmittingPool:
    """What a pool with `submit(task, source, language) -> Future` and a default `_window()` gets from it:
    streaming outcomes as they finish, and results in order (GPUPool here, RayPool on a cluster)."""

    def submit(self, task: str, source: str, language: str | None = None, retime: bool = False) -> cf.Future:
        """A Future of the EvalResult; `retime`: judged again on fresh seeds even when the result cache has it."""
        raise NotImplementedError

    def _window(self) -> int:
        raise NotImplementedError

    def close(self, wait: bool = True) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        # On an error or Ctrl-C, queued work is dropped and running evaluations are not waited for.
        self.close(wait=exc_type is None)

    def imap_unordered(self, jobs: Iterable[tuple[Any, tuple]], window: int | None = None) -> Iterator[Outcome]:
        """Evaluate `(tag, (task, source, language))` items; yield an Outcome per item as each finishes.

        At most `window` items are submitted ahead (default: enough to keep the compilers and
        every slot busy), so a long or lazy iterable is read as the work proceeds.
        """
        window = window or self._window()
        pending: dict[cf.Future, Any] = {}
        items = iter(jobs)
        exhausted = False
        while pending or not exhausted:
            while not exhausted and len(pending) < window:
                try:
                    tag, args = next(items)
                except StopIteration:
                    exhausted = True
                    break
                try:
                    pending[self.submit(*args)] = tag
                except Exception as e:  # an unknown task or language: this item fails, the rest go on
                    failed: cf.Future = cf.Future()
                    failed.set_exception(e)
                    pending[failed] = tag
            if not pending:
                break
            done, _ = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
            for future in done:
                tag = pending.pop(future)
                error = future.exception()
                yield Outcome(tag, None if error else future.result(), error, getattr(future, "slot", None))

    def evaluate_many(self, jobs: Iterable[tuple[str, str, str | None]]) -> list[EvalResult]:
        """Results in the order of `jobs`; raises the first judge failure."""
        futures = [self.submit(*job) for job in jobs]
        return [f.result() for f in futures]


class GPUPool(SubmittingPool):
    """Evaluates submissions on N slots (one per GPU, or CPU slots), compiling ahead on the CPU cores.

    `judge_factory(device)` makes each slot's judge (default: `Judge(device, **judge_kwargs)`).
    Identical submissions (same task, language and text) in flight at the same time are judged
    once and share the verdict. Thread-safe: submit from any thread.
    """

    def __init__(
        self,
        devices: str | Iterable[str] | None = "auto",
        *,
        cpu_slots: int | None = None,
        compile_workers: int | None = None,
        judge_factory: Callable[[str], Any] | None = None,
        coalesce: bool = True,
        workers_per_gpu: int = 1,
        retime: bool = False,
        **judge_kwargs,
    ):
        if workers_per_gpu < 1:
            raise ValueError(f"workers_per_gpu must be at least 1, not {workers_per_gpu}")
        specs = [spec for spec in parse_devices(devices, cpu_slots)
                 for _ in range(1 if spec.device == "cpu" else workers_per_gpu)]
        self.retime = retime  # evaluate identical submissions again even when the judges' result cache has them
        if len(specs) > 1 and judge_kwargs.get("isolation") == "none":
            raise ValueError("isolation='none' runs submissions inside the judge's process; a pool of "
                             f"{len(specs)} slots needs isolation='process'")  # fmt: skip
        if judge_factory is None:

            def judge_factory(device: str):
                return SlotJudge(device, **judge_kwargs)

        self.slots = [Slot(spec, judge_factory(spec.device)) for spec in specs]
        self._archs = list(dict.fromkeys(slot.judge.device.arch for slot in self.slots))
        self.compile_workers = compile_workers or cpu_cores()
        self._compile = cf.ThreadPoolExecutor(self.compile_workers, thread_name_prefix="kerneldojo-compile")
        self._runs: queue.Queue[_Job | None] = queue.Queue()
        self._coalesce = coalesce
        self._inflight: dict[str, list[cf.Future]] = {}  # key -> futures of later identical submissions
        self._lock = threading.Lock()
        self._closed = False
        self.stats = PoolStats(gpus=len({s.spec.device for s in self.slots if s.spec.device != "cpu"}) or None)
        self._threads = [threading.Thread(target=self._serve, args=(slot,), name=f"kerneldojo-slot-{slot.name}",
                                          daemon=True) for slot in self.slots]  # fmt: skip
        for thread in self._threads:
            thread.start()

    def __len__(self) -> int:
        return len(self.slots)

    def describe(self) -> str:
        devices = ", ".join(slot.name for slot in self.slots)
        if all(slot.spec.device == "cpu" for slot in self.slots):
            devices = f"cpu x{len(self.slots)}"
        return f"{len(self.slots)} slot{'s' if len(self.slots) != 1 else ''} ({devices}), " \
               f"{self.compile_workers} compile threads"  # fmt: skip

    # -- submitting -------------------------------------------------------------------------

    def submit(self, task: str, source: str, language: str | None = None, retime: bool = False) -> cf.Future:
        """A Future of the EvalResult. Raises at once for an unknown task or a language it does not take."""
        task_obj = get_task(task)
        task_obj.reference  # noqa: B018  (load it here, not racing in several threads)
        language = language or detect_language(source)
        check_language(task_obj, language)
        future: cf.Future = cf.Future()
        key = submission_hash(task_obj.id, language, source) + (":retime" if retime else "")  # never shares a reuse
        with self._lock:
            if self._closed:
                raise RuntimeError("the pool is closed")
            if self._coalesce and key in self._inflight:
                self._inflight[key].append(future)
                return future
            self._inflight[key] = []
        job = _Job(task_obj.id, source, language, key, future, retime=retime)
        staged = self._compile.submit(self._prepare, job)
        staged.add_done_callback(lambda f: f.cancelled() and self._finish(job, error=cf.CancelledError("pool closed")))
        return future

    def _window(self) -> int:
        return 2 * (len(self.slots) + self.compile_workers)

    def close(self, wait: bool = True) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._compile.shutdown(wait=wait, cancel_futures=not wait)
        if not wait:  # drop what waits for a slot
            while True:
                try:
                    job = self._runs.get_nowait()
                except queue.Empty:
                    break
                if job is not None:
                    self._finish(job, error=cf.CancelledError("pool closed"))
        for _ in self._threads:
            self._runs.put(None)
        if wait:
            for thread in self._threads:
                thread.join()

    # -- the two stages ---------------------------------------------------------------------

    def _prepare(self, job: _Job) -> None:
        """Compile stage (a CPU thread): build native sources for every arch in the pool."""
        try:
            if job.language in NATIVE_LANGUAGES:
                task = get_task(job.task)
                started = time.perf_counter()
                for arch in self._archs:
                    try:
                        compile_submission(task, job.source, job.language, arch)
                    except TransientCompileError:  # the machine cut it: the judge's own compile step tries again
                        break
                    except CompileError as e:
                        slot = next(s for s in self.slots if s.judge.device.arch == arch)
                        result = compile_error_result(slot.judge, job, str(e), time.perf_counter() - started)
                        self._finish(job, result)
                        return
                job.compile_s = time.perf_counter() - started
        except Exception:  # anything else: the judge's own compile step meets it again and reports it
            pass
        job.queued_at = time.perf_counter()
        self._runs.put(job)

    def _serve(self, slot: Slot) -> None:
        """Slot stage: this thread alone uses the slot's device, one evaluation at a time."""
        device = slot.judge.device
        if device.mode == "gpu":
            torch.cuda.set_device(device.torch_device)  # per thread: events, streams, Triton launches
        while True:
            job = self._runs.get()
            if job is None:
                return
            with self._lock:
                abandoned = job.future.cancelled() and not self._inflight.get(job.key)
            if abandoned:
                self._finish(job)
                continue
            queued_s = time.perf_counter() - job.queued_at
            try:
                # a custom judge_factory's judge may not take `retime`
                retime = {"retime": True} if self.retime or job.retime else {}
                result = slot.judge.evaluate(job.task, job.source, job.language, **retime)
            except BaseException as e:  # a failure of the judge, not of the submission
                self._finish(job, error=e, slot=slot)
                continue
            slot.evaluations += 1
            result.compile_s += job.compile_s
            result.wall_s += job.compile_s + queued_s
            if not result.reused:
                result.phases = {"queue": queued_s, **result.phases}
                result.phases["compile"] = result.phases.get("compile", 0.0) + job.compile_s
            self.stats.add(result)
            self._finish(job, result, slot=slot)

    def report(self) -> str:
        """Throughput and where the time went, for the batch's summary."""
        return self.stats.render()

    def _finish(self, job: _Job, result: EvalResult | None = None, error: BaseException | None = None,
                slot: Slot | None = None) -> None:  # fmt: skip
        with self._lock:
            followers = self._inflight.pop(job.key, [])
        for i, future in enumerate([job.future, *followers]):
            future.slot = slot.name if slot else None
            try:
                if error is not None:
                    future.set_exception(error)
                elif result is not None:
                    future.set_result(result if i == 0 else result.model_copy(deep=True))
            except cf.InvalidStateError:  # cancelled by its caller
                pass


class PoolStats:
    """Counts over a pool's results: evaluations per GPU-hour (wall time since the pool started, times its
    GPUs), how many were reused from the result cache, and the share of each phase in the evaluated ones."""

    def __init__(self, gpus: int | None):
        self.gpus, self.started = gpus, time.perf_counter()
        self.evaluations = self.reused = 0
        self.statuses: dict[str, int] = {}
        self.phases: dict[str, float] = {}
        self._lock = threading.Lock()

    def add(self, result: EvalResult) -> None:
        with self._lock:
            self.evaluations += 1
            self.reused += result.reused
            self.statuses[result.status] = self.statuses.get(result.status, 0) + 1
            for name, seconds in result.phases.items():
                self.phases[name] = self.phases.get(name, 0.0) + seconds

    def summary(self) -> dict:
        with self._lock:
            wall_s = time.perf_counter() - self.started
            total = sum(self.phases.values()) or 1.0
            per_hour = self.evaluations / (wall_s / 3600) if wall_s > 0 else None
            return {
                "evaluations": self.evaluations, "reused": self.reused, "wall_s": wall_s, "gpus": self.gpus,
                "statuses": dict(self.statuses), "phase_seconds": dict(self.phases),
                "phase_share": {name: s / total for name, s in self.phases.items()},
                "evaluations_per_hour": per_hour,
                "evaluations_per_gpu_hour": per_hour / self.gpus if per_hour and self.gpus else None,
            }  # fmt: skip

    def render(self) -> str:
        s = summary = self.summary()
        rate = (f"{s['evaluations_per_gpu_hour']:.0f} evaluations per GPU-hour" if s["gpus"]
                else f"{s['evaluations_per_hour'] or 0:.0f} evaluations per hour (CPU mode)")
        shares = ", ".join(f"{name} {share:.0%}" for name, share in
                           sorted(summary["phase_share"].items(), key=lambda kv: -kv[1]) if share >= 0.005)
        return (f"kerneldojo: {s['evaluations']} evaluations in {s['wall_s']:.1f} s ({s['reused']} reused): "
                f"{rate}; time by phase: {shares or 'none'}")


_reference_file_lock = threading.Lock()
_reference_timing_lock = threading.Lock()


class SlotJudge(Judge):
    """A Judge for one slot among several in this process. Writes of the shared reference-time
    file never interleave. Reference timings are taken in a worker process of their own (with
    isolation='process' or 'docker', on a GPU), so slots share no interpreter while timing;
    where they run in this process (isolation='none'), they are taken one at a time, so another
    slot's reference loop does not hold the interpreter between a start event and its launch."""

    def _time_calls(self, calls):
        with _reference_timing_lock:
            return super()._time_calls(calls)

    def _save_reference_times(self) -> None:
        with _reference_file_lock:
            super()._save_reference_times()

    def _rank_devices(self, task):
        if self.device.mode == "gpu":  # its ranks' GPUs would be other slots'
            raise Unavailable(f"{task.id} runs a worker per GPU and a pool slot holds one GPU; evaluate it with "
                              "kerneldojo.judge.Judge on a host with the GPUs it needs")
        return super()._rank_devices(task)


def compile_error_result(judge, job: _Job, message: str, compile_s: float) -> EvalResult:
    """What `Judge.evaluate` returns for a source that does not compile, without taking a slot."""
    result = EvalResult(
        task=job.task, language=job.language, device=judge.device.name, mode=judge.device.mode,
        status="compile_error", messages=[message], versions=versions(), compile_s=compile_s, wall_s=compile_s,
    )  # fmt: skip
    result.reward = judge.reward("compile_error", None)
    return result
