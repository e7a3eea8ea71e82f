"""The GPU pool and batch evaluation, in CPU mode: fake judges record what ran where and when."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict

import pytest
import submissions as subs
import torch

from kerneldojo import batch
from kerneldojo.batch import pool as pool_mod
from kerneldojo.batch.pool import GPUPool, SlotSpec, cuda_visible_devices, parse_devices
from kerneldojo.judge import Judge, versions
from kerneldojo.result import CaseTiming, EvalResult, Evidence, TimeStats
from kerneldojo.sandbox.device import Device
from kerneldojo.sandbox.protocol import CompileError


class Recorder:
    """Counts evaluations in progress per device and overall, and the most seen at once."""

    def __init__(self):
        self.lock = threading.Lock()
        self.active: Counter = Counter()
        self.peak: Counter = Counter()
        self.peak_total = 0
        self.calls: list[tuple[str, str]] = []  # (device, source)

    def enter(self, key: str) -> None:
        with self.lock:
            self.active[key] += 1
            self.peak[key] = max(self.peak[key], self.active[key])
            self.peak_total = max(self.peak_total, sum(self.active.values()))

    def leave(self, key: str) -> None:
        with self.lock:
            self.active[key] -= 1


class FakeJudge(Judge):
    """A judge whose evaluation sleeps and records overlaps; its 'device' is the slot's device string."""

    def __init__(self, device: str, recorder: Recorder, seconds: float = 0.02):
        super().__init__("cpu")
        self.device = Device(torch.device("cpu"), "cpu", device, "90a")
        self.recorder, self.seconds = recorder, seconds

    def evaluate(self, task, source, language=None):
        self.recorder.enter(self.device.name)
        self.recorder.calls.append((self.device.name, source))
        try:
            time.sleep(self.seconds)
        finally:
            self.recorder.leave(self.device.name)
        ok = "wrong" not in source
        return EvalResult(task=task, language=language, device="Fake GPU", mode="gpu", status="ok" if ok else "wrong",
                          versions=versions())  # fmt: skip


@pytest.fixture
def gpus(monkeypatch):
    """Pretend torch sees this many GPUs."""

    def set_count(n):
        monkeypatch.setattr(pool_mod, "visible_gpu_count", lambda: n)

    return set_count


def fake_pool(devices, recorder, seconds=0.02, **kwargs):
    return GPUPool(devices, judge_factory=lambda d: FakeJudge(d, recorder, seconds), **kwargs)


def triton_source(i: int, wrong: bool = False) -> str:
    return f"{subs.VECTOR_ADD_TRITON}\n# variant {i}{' wrong' if wrong else ''}\n"


# -- devices --------------------------------------------------------------------------------


def test_cuda_visible_devices_parsing():
    assert cuda_visible_devices({}) is None
    assert cuda_visible_devices({"CUDA_VISIBLE_DEVICES": ""}) == []
    assert cuda_visible_devices({"CUDA_VISIBLE_DEVICES": "-1"}) == []
    assert cuda_visible_devices({"CUDA_VISIBLE_DEVICES": "0,2"}) == ["0", "2"]
    assert cuda_visible_devices({"CUDA_VISIBLE_DEVICES": " 3 , 1 "}) == ["3", "1"]
    assert cuda_visible_devices({"CUDA_VISIBLE_DEVICES": "0,1,-1,2"}) == ["0", "1"]  # the driver stops there
    assert cuda_visible_devices({"CUDA_VISIBLE_DEVICES": "GPU-8f2a,MIG-1c"}) == ["GPU-8f2a", "MIG-1c"]


def test_parse_devices(gpus):
    env = {"CUDA_VISIBLE_DEVICES": "4,6,7"}
    gpus(3)
    assert parse_devices("auto", environ=env) == [SlotSpec("cuda:0", "4"), SlotSpec("cuda:1", "6"),
                                                  SlotSpec("cuda:2", "7")]  # fmt: skip
    assert [str(s) for s in parse_devices("all", environ=env)] == ["cuda:0 (GPU 4)", "cuda:1 (GPU 6)",
                                                                   "cuda:2 (GPU 7)"]  # fmt: skip
    assert parse_devices(["cuda:0", "cuda:2"], environ={}) == [SlotSpec("cuda:0", "0"), SlotSpec("cuda:2", "2")]
    assert parse_devices("0,2", environ={}) == parse_devices("cuda:0, cuda:2", environ={})
    assert parse_devices("cuda", environ={}) == [SlotSpec("cuda:0", "0")]
    with pytest.raises(ValueError, match=r"cuda:3 asked for, but torch sees 3 GPUs visible \(CUDA_VISIBLE_DEVICES="):
        parse_devices("cuda:3", environ=env)
    with pytest.raises(ValueError, match="cuda:1 listed twice"):
        parse_devices("1,cuda:1")
    with pytest.raises(ValueError, match="mix CPU and GPU"):
        parse_devices("cpu,cuda:0")
    with pytest.raises(ValueError, match="'tpu' is not"):
        parse_devices("tpu")
    gpus(0)
    assert parse_devices("auto", cpu_slots=3) == [SlotSpec("cpu")] * 3
    assert parse_devices("cpu:5") == [SlotSpec("cpu")] * 5
    assert parse_devices(["cpu", "cpu"]) == [SlotSpec("cpu")] * 2
    assert 1 <= len(parse_devices("cpu")) <= pool_mod.MAX_DEFAULT_CPU_SLOTS
    with pytest.raises(ValueError, match="torch sees none"):
        parse_devices("all")
    with pytest.raises(ValueError, match="torch sees 0 GPUs"):
        parse_devices("cuda:0")


def test_isolation_none_needs_one_slot():
    with pytest.raises(ValueError, match="needs isolation='process'"):
        GPUPool("cpu:2", isolation="none")


# -- scheduling -----------------------------------------------------------------------------


def test_one_evaluation_per_device_at_a_time(gpus):
    gpus(4)
    recorder = Recorder()
    with fake_pool("all", recorder) as pool:
        jobs = [(i, ("vector_add", triton_source(i), "triton")) for i in range(40)]
        outcomes = list(pool.imap_unordered(jobs, window=40))
    assert sorted(o.tag for o in outcomes) == list(range(40))
    assert all(o.error is None and o.result.status == "ok" for o in outcomes)
    assert set(recorder.peak) == {"cuda:0", "cuda:1", "cuda:2", "cuda:3"}
    assert max(recorder.peak.values()) == 1  # never two on one device
    assert recorder.peak_total > 1  # but the devices did work side by side
    assert Counter(o.slot for o in outcomes).keys() == {"cuda:0", "cuda:1", "cuda:2", "cuda:3"}


def test_explicit_device_list_gets_only_those(gpus):
    gpus(3)
    recorder = Recorder()
    with fake_pool(["cuda:0", "cuda:2"], recorder) as pool:
        results = pool.evaluate_many([("vector_add", triton_source(i), None) for i in range(10)])
    assert len(results) == 10 and set(recorder.peak) == {"cuda:0", "cuda:2"}
    assert max(recorder.peak.values()) == 1


def test_compile_overlaps_on_cpu_threads_without_holding_a_slot(gpus, monkeypatch):
    gpus(1)
    compiling = Recorder()
    evaluating = Recorder()
    overlapped = threading.Event()
    calls: list[str] = []

    def fake_compile(task, source, language, arch):
        compiling.enter("nvcc")
        calls.append(arch)
        if evaluating.active["cuda:0"]:
            overlapped.set()  # built while the only GPU was busy judging something else
        time.sleep(0.05)
        compiling.leave("nvcc")
        if "undeclared" in source:
            raise CompileError("submission.cu(9): error: identifier \"undeclared\" is undefined")

    monkeypatch.setattr(pool_mod, "compile_submission", fake_compile)
    sources = [subs.VECTOR_ADD_CUDA + f"// {i}\n" for i in range(8)] + [subs.VECTOR_ADD_CUDA_ERROR]
    with fake_pool("all", evaluating, seconds=0.05, compile_workers=4) as pool:
        results = pool.evaluate_many([("vector_add", s, "cuda") for s in sources])
    assert compiling.peak["nvcc"] >= 2  # builds ran side by side
    assert overlapped.is_set()
    assert calls == ["90a"] * 9  # the slot's arch
    assert [r.status for r in results] == ["ok"] * 8 + ["compile_error"]
    assert "undeclared" in results[-1].messages[0] and results[-1].reward == 0.0
    assert len(evaluating.calls) == 8  # the compile error never took the slot


def test_a_build_the_machine_cut_goes_to_the_judge_not_the_store(gpus, monkeypatch):
    """Red team round 73: the compile stage recorded a `TransientCompileError` (a build killed, a full disk) as the
    source's `compile_error`, which a resumed batch never judges again; the judge's own compile step tries it again."""
    from kerneldojo.graders.compile import TransientCompileError

    gpus(1)

    def cut(task, source, language, arch):
        raise TransientCompileError("the build was killed by SIGKILL")

    monkeypatch.setattr(pool_mod, "compile_submission", cut)
    evaluating = Recorder()
    with fake_pool("all", evaluating) as pool:
        (result,) = pool.evaluate_many([("vector_add", subs.VECTOR_ADD_CUDA, "cuda")])
    assert result.status == "ok" and len(evaluating.calls) == 1


def test_identical_submissions_in_flight_are_judged_once(gpus):
    gpus(2)
    recorder = Recorder()
    with fake_pool("all", recorder, seconds=0.1) as pool:
        futures = [pool.submit("vector_add", triton_source(0), "triton") for _ in range(5)]
        results = [f.result() for f in futures]
    assert len(recorder.calls) == 1
    assert all(r == results[0] for r in results) and len({id(r) for r in results}) == 5


def test_a_retime_submission_is_judged_afresh_not_shared(gpus):
    """`submit(retime=True)` (re-judging a reused new best) asks the judge to retime, and never shares the verdict
    of an identical submission in flight, which may come from the result cache."""

    class RetimeJudge(FakeJudge):
        def evaluate(self, task, source, language=None, retime=False):
            self.recorder.calls.append((self.device.name, f"retime={retime}"))
            return super().evaluate(task, source, language)

    gpus(1)
    recorder = Recorder()
    with GPUPool("all", judge_factory=lambda d: RetimeJudge(d, recorder, 0.1)) as pool:
        futures = [pool.submit("vector_add", triton_source(0), "triton", retime=r) for r in (False, True, False)]
        assert all(f.result().ok for f in futures)
    assert sorted(call for _, call in recorder.calls if call.startswith("retime=")) == ["retime=False", "retime=True"]


def test_bad_task_or_language_fails_that_item_only(gpus):
    gpus(1)
    with fake_pool("all", Recorder()) as pool:
        with pytest.raises(Exception, match="unknown task"):
            pool.submit("vectoradd", "x", "triton")
        jobs = [("bad", ("vector_add", subs.VECTOR_ADD_CUDA, "cute")), ("good", ("vector_add", triton_source(1), None))]
        outcomes = {o.tag: o for o in pool.imap_unordered(jobs)}
    assert "not 'cute'" in str(outcomes["bad"].error) and outcomes["good"].result.status == "ok"


def test_real_cpu_slots():
    """The real judge and worker processes on two CPU slots (the Triton interpreter)."""
    with GPUPool("cpu:2") as pool:
        good, wrong = pool.evaluate_many([("vector_add", subs.VECTOR_ADD_TRITON, None),
                                          ("vector_add", subs.VECTOR_ADD_OFF_BY_ONE, None)])  # fmt: skip
    assert good.status == "ok" and good.cases_checked > 0 and not good.timed, good.messages
    assert wrong.status == "wrong" and wrong.mismatch is not None


# -- batch: store, resume, leaderboard ------------------------------------------------------


def make_submissions(n: int, task: str = "vector_add") -> list[batch.Submission]:
    return [batch.submission(task, triton_source(i), None, f"run/{i}.py") for i in range(n)]


def test_resume_after_a_kill(tmp_path, gpus):
    gpus(2)
    store = tmp_path / "results.jsonl"
    subs_all = make_submissions(6)
    first = Recorder()
    with fake_pool("all", first) as pool:
        batch.run_batch(subs_all[:3], store, pool)
    # Killed while writing the fourth result: half a line, no newline.
    lines = store.read_bytes().splitlines(keepends=True)
    assert len(lines) == 3
    torn = json.dumps({"label": "run/3.py", "hash": subs_all[3].hash, "task": "vector_add", "status": "ok"})
    store.write_bytes(b"".join(lines) + torn[: len(torn) // 2].encode())
    assert batch.ResultStore(store).finished() == {s.key for s in subs_all[:3]}

    second = Recorder()
    with fake_pool("all", second) as pool:
        summary = batch.run_batch(subs_all, store, pool)
    assert (summary.skipped, summary.evaluated, summary.failed) == (3, 3, 0)
    assert sorted(src for _, src in second.calls) == sorted(s.source for s in subs_all[3:])
    records = [json.loads(line) for line in store.read_text().splitlines()]  # every line whole again
    assert sorted(r["label"] for r in records) == sorted(s.label for s in subs_all)
    assert all(r["hash"] == next(s.hash for s in subs_all if s.label == r["label"]) for r in records)
    assert EvalResult.model_validate(records[0]).status == "ok"
    with fake_pool("all", Recorder()) as pool:  # nothing left to do
        assert batch.run_batch(subs_all, store, pool).evaluated == 0


def test_edited_submission_is_evaluated_again(tmp_path, gpus):
    gpus(1)
    store = tmp_path / "r.jsonl"
    sub = make_submissions(1)[0]
    edited = batch.submission(sub.task, sub.source + "# edited\n", None, sub.label)
    with fake_pool("all", Recorder()) as pool:
        batch.run_batch([sub], store, pool)
        assert batch.run_batch([edited, sub], store, pool).evaluated == 1


def test_one_writer_per_store(tmp_path):
    store = batch.ResultStore(tmp_path / "r.jsonl")
    with store.writer(), pytest.raises(ValueError, match="another batch is writing"), store.writer():
        pass


def test_load_from_folder_and_manifest(tmp_path):
    (tmp_path / "subs" / "vector_add").mkdir(parents=True)
    (tmp_path / "subs" / "vector_add" / "a.py").write_text(subs.VECTOR_ADD_TRITON)
    (tmp_path / "subs" / "vector_add" / "b.cu").write_text(subs.VECTOR_ADD_CUDA)
    (tmp_path / "subs" / "notes").mkdir()
    found = batch.load_submissions(tmp_path / "subs")
    assert [(s.task, s.language, s.label) for s in found] == [
        ("vector_add", "triton", "subs/vector_add/a.py"), ("vector_add", "cuda", "subs/vector_add/b.cu")]

    (tmp_path / "subs" / "vector_add" / "link.py").symlink_to(tmp_path / "subs" / "vector_add" / "a.py")
    with pytest.raises(ValueError, match="symbolic link"):  # a folder's entry is not followed either
        batch.load_submissions(tmp_path / "subs")

    manifest = tmp_path / "m.jsonl"
    manifest.write_text("\n".join([
        json.dumps({"task": "vector_add", "file": "subs/vector_add/a.py"}),
        json.dumps({"task": "vector_add", "source": subs.VECTOR_ADD_TORCH, "label": "torch-one"}),
        "",
    ]))  # fmt: skip
    found = batch.load_submissions(manifest)
    assert [(s.label, s.language) for s in found] == [("subs/vector_add/a.py", "triton"), ("torch-one", "python")]
    for line, message in [
        ('{"task": "vectoradd", "source": "x"}', "m.jsonl:1: unknown task 'vectoradd'"),
        ('{"task": "vector_add"}', 'needs "task" and one of "source" or "file"'),
        ('{"task": "vector_add", "file": "nope.py"}', "no such file"),
        ('{"task": "vector_add", "file": "/etc/hostname"}', "relative to the manifest"),  # red team round 18
        ('{"task": "vector_add", "file": "subs/../../secret.py"}', "relative to the manifest"),
        ('{"task": "vector_add", "file": "subs/vector_add/link.py"}', "symbolic link"),
        ("{oops", "not a JSON object"),
        ('{"task": "vector_add", "source": "__global__", "language": "cute"}', "not 'cute'"),
    ]:
        manifest.write_text(line + "\n")
        with pytest.raises(ValueError, match=message):
            batch.load_submissions(manifest)


def record(task, device, status="ok", speedup=None, label="x", checks=(), timed=None):
    timed = speedup is not None if timed is None else timed
    stats = TimeStats(median_ms=1.0, mean_ms=1.0, min_ms=1.0, max_ms=1.0, iqr_ms=0.0, runs=10)
    result = EvalResult(task=task, language="triton", device=device, mode="gpu", status=status, timed=timed,
                        speedup=speedup, checks_fired=list(checks), versions=versions(),
                        timings=[CaseTiming(case="n=1", submission=stats)] if timed else [],
                        evidence=Evidence(case="n=1", claimed_ms=1.0) if timed else None)  # fmt: skip
    return {"label": label, "hash": "h", "slot": "cuda:0", **result.model_dump(mode="json")}


def test_leaderboard_best_correct_per_task_and_gpu():
    h100, a100 = "NVIDIA H100", "NVIDIA A100"
    records = [
        record("softmax", h100, speedup=1.5, label="slow"),
        record("softmax", h100, speedup=2.5, label="fast"),
        record("softmax", h100, status="wrong", speedup=9.0, label="wrong"),
        record("softmax", h100, status="flagged", speedup=20.0, label="cheat"),
        record("softmax", h100, speedup=30.0, label="fired", checks=["forbidden_ops"]),
        record("softmax", h100, status="timeout", label="hang"),
        record("softmax", a100, speedup=1.2, label="a100-best"),
        record("gelu", h100, status="runtime_error", label="crash"),
        {"label": "junk", "status": "ok"},  # not a result
    ]
    board = {(s.task, s.device): s for s in batch.standings(records)}
    assert board[("softmax", h100)].best["label"] == "fast"
    assert (board[("softmax", h100)].correct, board[("softmax", h100)].submitted) == (2, 6)
    assert board[("softmax", a100)].best["label"] == "a100-best"
    assert board[("gelu", h100)].best is None
    text = batch.render_leaderboard(records)
    rows = {tuple(line.split()[:2]) for line in text.splitlines()[2:]}
    assert ("gelu", "NVIDIA") in rows and "fast" in text and "2.50" in text and "cheat" not in text
    assert "0/1" in text and "Nothing was timed" not in text


def test_leaderboard_untimed_cpu_mode():
    records = [record("vector_add", "cpu", speedup=None, label="a"), record("vector_add", "cpu", "wrong", label="b")]
    text = batch.render_leaderboard(records)
    assert "a" in text.split() and "1/2" in text and "Nothing was timed" in text


def test_store_skips_unreadable_lines(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(record("gelu", "cpu", label="a")) + "\nnot json\n" + json.dumps({"x": 1}) + "\n")
    store = batch.ResultStore(path)
    assert [r["label"] for r in store.records()] == ["a"] and store.unreadable == 2
    assert "2 unreadable lines skipped" in batch.render_store(path)


def test_threads_are_per_slot(gpus):
    gpus(2)
    names: dict[str, set] = defaultdict(set)

    class ThreadJudge(FakeJudge):
        def evaluate(self, task, source, language=None):
            names[self.device.name].add(threading.current_thread().name)
            return super().evaluate(task, source, language)

    with GPUPool("all", judge_factory=lambda d: ThreadJudge(d, Recorder(), 0.0)) as pool:
        pool.evaluate_many([("vector_add", triton_source(i), None) for i in range(12)])
    assert all(len(threads) == 1 for threads in names.values())


KILLED_BATCH = """
import sys, time
from kerneldojo import batch
from kerneldojo.judge import Judge, versions
from kerneldojo.result import EvalResult
from kerneldojo.batch.pool import GPUPool

class Slow(Judge):
    def __init__(self, device):
        super().__init__("cpu")
    def evaluate(self, task, source, language=None):
        time.sleep(0.05)
        return EvalResult(task=task, language=language, device="cpu", mode="cpu", status="ok", versions=versions())

subs = [batch.submission("vector_add", f"def solution(x, y):\\n    return x + y  # {i}\\n", None, f"s{i}")
        for i in range(400)]
with GPUPool("cpu:2", judge_factory=Slow) as pool:
    batch.run_batch(subs, sys.argv[1], pool)
"""


def test_a_killed_batch_keeps_what_it_finished(tmp_path):
    store = tmp_path / "results.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", KILLED_BATCH, str(store)])
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not store.exists() or store.read_bytes().count(b"\n") < 10):
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    kept = batch.ResultStore(store).finished()
    assert 10 <= len(kept) < 400
    subs_all = [batch.submission("vector_add", f"def solution(x, y):\n    return x + y  # {i}\n", None, f"s{i}")
                for i in range(400)]  # fmt: skip
    with fake_pool("cpu:2", Recorder(), seconds=0.0) as pool:
        summary = batch.run_batch(subs_all, store, pool)
    assert summary.skipped == len(kept) and summary.evaluated == 400 - len(kept)
    labels = [json.loads(line)["label"] for line in store.read_text().splitlines()]
    assert sorted(labels) == sorted(s.label for s in subs_all)


def test_a_worker_outlives_the_thread_that_started_it():
    """Workers die with the thread that forked them (parent-death signal); slot threads come and go."""
    from kerneldojo.sandbox import process
    from kerneldojo.sandbox.device import resolve_device

    box = {}

    def start():
        box["worker"] = worker = process._Worker(resolve_device("cpu"))
        worker.protections()  # the worker has entered its sandbox, parent-death signal set

    thread = threading.Thread(target=start)
    thread.start()
    thread.join()
    time.sleep(1.0)
    try:
        assert box["worker"].process.is_alive()
    finally:
        box["worker"].stop()
