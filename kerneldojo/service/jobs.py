"""The service's jobs: one per submitted evaluation, logged before it is acknowledged, run on an executor,
its result appended to the ResultStore.

The job log (`<state_dir>/jobs.jsonl`) gets a synced line when a job is queued and when it ends. On
start the log is replayed: a job that ended keeps its verdict (read back from the store), and a job
still queued or running when the service died runs again, unless the store already holds a result
for it (each record names its job): a result is appended to the store before its job's end is logged, so a
kill between the two loses nothing and evaluates nothing twice.
Identical submissions in flight at once (task, language and exact source, under the same task version and judge
protocol: `verdict_key`) share one evaluation. Reusing an earlier verdict is the judge's alone (its result cache,
keyed by device, software versions and its settings, and storing only what its rules allow: a timed `ok` only where
the evidence pass ran): the service keeps no verdicts of its own to serve (red team round 33: a second layer that
did served an unchecked `ok`, and a CPU-mode `ok` to a GPU job). A job answered from the judge's cache says
`reused`; one that would be the new best of its task is judged again on fresh seeds before it is stored
(`rejudged`), as in `run_batch`.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import json
import os
import threading
import time
import uuid
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from kerneldojo.batch import Submission, record_of
from kerneldojo.batch.leaderboard import Bests
from kerneldojo.batch.store import ResultStore, stamped
from kerneldojo.result import EvalResult
from kerneldojo.tasks import TaskError, task_content_hash
from kerneldojo.version import PROTOCOL_VERSION

from .privacy import for_viewer, visible_to

# What a job's view and the log hold; `record` and `error` are filled when it ends.
LOGGED = ("id", "task", "language", "source", "label", "hash", "owner", "public", "batch", "created")


class Executor(Protocol):
    """What runs evaluations: `GPUPool` (this host's GPUs or CPU slots) or `RayPool` (judge actors)."""

    slots: list  # one per device: GPUPool's Slot, RayPool's actor description

    def submit(self, task: str, source: str, language: str | None = None, retime: bool = False) -> cf.Future: ...

    def describe(self) -> str: ...

    def close(self, wait: bool = True) -> None: ...

    def __len__(self) -> int: ...


@dataclass
class Job:
    id: str
    task: str
    language: str
    source: str
    label: str
    hash: str
    owner: str
    public: bool = False
    batch: str | None = None
    created: float = field(default_factory=time.time)
    state: str = "queued"  # queued -> running -> done | failed (the judge itself failed: nothing stored)
    record: dict | None = None  # the store's record of the verdict
    reused: bool = False  # the judge's cached verdict of an identical submission, or one shared in flight
    error: str | None = None
    task_hash: str | None = None  # the task's version when the job started: with `hash`, its `verdict_key`
    started: float | None = None
    finished: float | None = None
    ended: threading.Event = field(default_factory=threading.Event, repr=False)

    def visible_to(self, viewer: str | None) -> bool:
        return visible_to({"owner": self.owner, "public": self.public}, viewer)

    def view(self, viewer: str | None) -> dict:
        """What `viewer` sees (`privacy.for_viewer`): the source and who submitted it only for its owner, or
        when the owner made it public. `result` is the verdict's record under this job's own identity (a reused
        verdict's record names the earlier job and its submitter)."""
        out = {k: getattr(self, k) for k in (*LOGGED, "state", "reused", "error", "started", "finished")}
        if self.record is not None:
            mine = {"label": self.label, "hash": self.hash, "owner": self.owner, "public": self.public, "job": self.id}
            out["result"] = {**{k: v for k, v in self.record.items() if k != "source"}, **mine}
        else:
            out["result"] = None
        return for_viewer(out, viewer)


def verdict_key(submission_hash: str, task_hash: str | None, protocol: int | None) -> str:
    """Which jobs in flight share one evaluation: the submission (task, language, exact source), the task's version
    (its files' hash) and the judge protocol."""
    return f"{submission_hash}:{task_hash}:p{protocol}"


def current_task_hash(task: str) -> str | None:
    try:
        return task_content_hash(task)
    except TaskError:  # a task this installation no longer has: nothing to reuse
        return None


class Metrics(Protocol):
    def queued(self, depth: int, running: int) -> None: ...

    def ended(self, job: Job, result: EvalResult | None) -> None:
        """`job` is done (its verdict `result`, or an earlier one when `job.reused`) or failed."""


class QuotaExceeded(Exception):
    """A submission past its owner's quota of evaluations."""


class JobQueue:
    """Jobs in arrival order over an executor; `in_flight` of them on it at once. Thread-safe."""

    def __init__(self, state_dir: Path, store: ResultStore, executor: Executor, in_flight: int,
                 metrics: Metrics | None = None):  # fmt: skip
        state_dir.mkdir(parents=True, exist_ok=True)
        self.executor, self.in_flight, self.metrics = executor, max(1, in_flight), metrics
        self.jobs: dict[str, Job] = {}
        self._pending: deque[Job] = deque()
        self._dispatching = False  # a refused submit fails its job inside the loop, which then goes on
        self._running: dict[str, list[Job]] = {}  # hash -> the jobs waiting for its evaluation
        self._lock = threading.RLock()
        self._closing = False  # a stop: what the executor drops stays queued in the log, to run after a restart
        self._stack = contextlib.ExitStack()
        self._append_result = self._stack.enter_context(store.writer())  # held while the service runs
        self._by_job: dict[str, dict] = {}  # job id -> the record its evaluation wrote
        self._by_hash: dict[str, dict] = {}  # submission hash -> its last record (an ended job's, reused)
        self._bests = Bests()  # a reused result that would beat one is judged again before it is stored
        for record in store.records():
            self._remember(record)
        self._log_path = state_dir / "jobs.jsonl"
        self._replay()
        self._log = open(self._log_path, "a", encoding="utf-8")  # noqa: SIM115  (closed by close())
        self._stack.callback(self._log.close)
        with self._lock:
            for job in [j for j in self.jobs.values() if j.state == "queued"]:
                self._start(job)
            self._dispatch()

    # -- the log ----------------------------------------------------------------------------

    def _replay(self) -> None:
        if not self._log_path.exists():
            return
        with open(self._log_path, "rb") as f:
            lines = f.read().split(b"\n")
        for raw in lines[:-1]:  # the last piece is "" or a line cut short by a kill
            try:
                entry = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            op = entry.pop("op", None)
            if op == "queued":
                self.jobs[entry["id"]] = Job(**{k: entry[k] for k in LOGGED})
            elif op in ("done", "failed") and (job := self.jobs.get(entry.get("id"))):
                job.state, job.error, job.finished = op, entry.get("error"), entry.get("at")
                job.reused = bool(entry.get("reused"))
                job.record = self._recorded(job) if op == "done" else None
                job.ended.set()
        if lines[-1]:  # drop the torn line so appends start on a fresh one
            with open(self._log_path, "r+b") as f:
                f.truncate(len(b"\n".join(lines[:-1])) + (1 if len(lines) > 1 else 0))

    def _write(self, entry: dict) -> None:
        self._log.write(json.dumps(entry, separators=(",", ":")) + "\n")
        self._log.flush()
        os.fsync(self._log.fileno())

    # -- submitting -------------------------------------------------------------------------

    def submit(self, sub: Submission, owner: str, public: bool = False, batch: str | None = None) -> Job:
        job = Job(uuid.uuid4().hex[:16], sub.task, sub.language, sub.source, sub.label, sub.hash, owner, public, batch)
        with self._lock:
            self.jobs[job.id] = job
            self._write({"op": "queued", **{k: getattr(job, k) for k in LOGGED}})
            self._start(job)
            self._dispatch()
        return job

    def submit_within(self, subs: list[tuple[Submission, bool]], owner: str, quota: int | None,
                      batch: str | None = None) -> list[Job]:
        """Submit (submission, public) pairs together, `owner`'s quota counted and the jobs queued under one lock:
        checked apart from the queuing, parallel requests each passed the check (red team round 42: 12 jobs past a
        quota of 2)."""
        with self._lock:  # re-entrant: submit takes it again
            held = self.count(owner)
            if quota is not None and held + len(subs) > quota:
                raise QuotaExceeded(f"quota of {quota} evaluations for {owner!r} used up ({held} so far)")
            return [self.submit(sub, owner, public, batch) for sub, public in subs]

    def batch(self, batch_id: str) -> list[Job]:
        """The jobs of one batch, read under the lock (a submit on another thread grows the table: red team round
        102)."""
        with self._lock:
            return [j for j in self.jobs.values() if j.batch == batch_id]

    def count(self, owner: str) -> int:
        with self._lock:
            return sum(j.owner == owner for j in self.jobs.values())

    def depth(self) -> tuple[int, int]:
        """(queued, running)."""
        with self._lock:
            return len(self._pending), sum(len(v) for v in self._running.values())

    def _remember(self, record: dict) -> None:
        self._bests.add(record)
        if record.get("job"):
            self._by_job[record["job"]] = record
        if record.get("hash"):
            self._by_hash[record["hash"]] = record

    def _recorded(self, job: Job) -> dict | None:
        """An ended job's record: the one its evaluation wrote, else (reused) the last one of its submission."""
        return self._by_job.get(job.id) or self._by_hash.get(job.hash)

    @staticmethod
    def _key(job: Job) -> str:
        return verdict_key(job.hash, job.task_hash, PROTOCOL_VERSION)

    def _start(self, job: Job) -> None:
        job.task_hash = current_task_hash(job.task)
        key = self._key(job)
        if (own := self._by_job.get(job.id)) is not None:  # evaluated before a kill, its end not logged
            self._end(job, own, reused=False)
        elif key in self._running:
            self._running[key].append(job)
        else:
            self._running[key] = [job]
            self._pending.append(job)

    def _dispatch(self) -> None:
        if self._dispatching:  # called back from `_finish` inside this loop (red team round 79: a thousand refused
            return  # submits at a restart recursed out)
        self._dispatching = True
        try:
            while not self._closing and self._pending and len(self._running) - len(self._pending) < self.in_flight:
                job = self._next_pending()
                job.state, job.started = "running", time.time()
                try:
                    future = self.executor.submit(job.task, job.source, job.language)
                except Exception as e:  # validated on submit; a pool that closed under us, a task retired
                    self._finish(job, None, e, None)
                    continue
                future.add_done_callback(lambda f, job=job: self._on_result(job, f))
        finally:
            self._dispatching = False
        if self.metrics:
            self.metrics.queued(*self.depth())

    def _next_pending(self) -> Job:
        """The oldest pending evaluation among those of whose owners the least busy has the fewest running now (an
        evaluation shared by several owners' identical jobs counts as its least busy owner's): one owner's thousand
        hanging jobs queue behind each other, not ahead of everyone's (red team rounds 78, 79)."""
        running = Counter(waiters[0].owner for waiters in self._running.values() if waiters[0].state == "running")

        def busy(job: Job) -> int:
            return min(running[w.owner] for w in self._running.get(self._key(job), [job]))

        job = min(self._pending, key=busy)  # min keeps the first, the oldest, of equals
        self._pending.remove(job)
        return job

    def _on_result(self, job: Job, future: cf.Future, rejudged: bool = False) -> None:
        if future.cancelled():
            self._finish(job, None, RuntimeError("cancelled: the executor closed"), None)
        elif error := future.exception():
            self._finish(job, None, error, None)
        elif not rejudged and self._rejudge(job, future.result()):
            return
        else:
            self._finish(job, future.result(), None, getattr(future, "slot", None), rejudged)

    def _record(self, job: Job, result: EvalResult, slot: str | None, rejudged: bool) -> dict:
        sub = Submission(job.task, job.source, job.language, job.label)
        mark = {"rejudged": True} if rejudged else {}
        return stamped({**record_of(sub, result, slot), "owner": job.owner, "public": job.public, "job": job.id,
                        "task_hash": job.task_hash, "protocol": PROTOCOL_VERSION, **mark})  # fmt: skip

    def _rejudge(self, job: Job, result: EvalResult) -> bool:
        """A reused result that would be the new best: judged again on fresh seeds (never waited for here, on the
        executor's thread, which the fresh evaluation may need), and that result is stored instead."""
        with self._lock:
            if not self._bests.rejudge(self._record(job, result, None, False)):
                return False
        try:
            future = self.executor.submit(job.task, job.source, job.language, retime=True)
        except Exception as e:  # a pool that closed under us
            self._finish(job, None, e, None)
            return True
        future.add_done_callback(lambda f: self._on_result(job, f, rejudged=True))
        return True

    def _finish(self, job: Job, result: EvalResult | None, error: BaseException | None, slot: str | None,
                rejudged: bool = False) -> None:  # fmt: skip
        with self._lock:
            if self._closing:  # dropped by the stop (or ending after it), not failed: no end logged, so a restarted
                return  # service runs it again (red team round 78: a graceful stop failed every queued job for good)
            waiting = self._running.pop(self._key(job), [job])
            if result is not None:
                record = self._record(job, result, slot, rejudged)
                try:
                    self._append_result(record)  # before the job's end is logged: see the module's docstring
                except Exception as e:  # the store refused it: this job fails, saying why, and the queue goes on
                    result, error = None, RuntimeError(f"the result could not be stored: {type(e).__name__}: {e}")
                else:
                    self._remember(record)
            for i, waiter in enumerate(waiting):
                try:
                    if result is not None:
                        self._end(waiter, record, reused=i > 0 or result.reused, result=result)
                    else:
                        waiter.state, waiter.finished = "failed", time.time()
                        waiter.error = f"{type(error).__name__}: {error}"
                        self._write({"op": "failed", "id": waiter.id, "error": waiter.error, "at": waiter.finished})
                        if self.metrics:
                            self.metrics.ended(waiter, None)
                except OSError as e:  # the job log refused its end (a full disk: red team round 67): the job ends
                    # here all the same and the queue goes on; a restarted service judges it again
                    waiter.error = waiter.error or f"the job's end could not be logged: {e}"
                finally:
                    waiter.ended.set()
            self._dispatch()

    def _end(self, job: Job, record: dict, reused: bool, result: EvalResult | None = None) -> None:
        job.state, job.record, job.reused, job.finished = "done", record, reused, time.time()
        self._write({"op": "done", "id": job.id, "reused": reused, "at": job.finished})
        job.ended.set()
        if self.metrics:
            self.metrics.ended(job, result)

    def wait(self, job: Job, timeout: float | None) -> bool:
        return job.ended.wait(timeout)

    def close(self, wait: bool = False) -> None:
        self._closing = True
        self.executor.close(wait=wait)
        with self._lock:
            self._stack.close()

