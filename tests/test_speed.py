"""Issue 14: the phase breakdown, the result cache, limits that fit the work, the timing's stopping rule.
No timing thresholds: these check what is recorded and decided, not how fast."""

import time

import pytest
import submissions as subs

from env.feedback import render_feedback
from kerneldojo.graders.timing import median_ci, summarize


def test_phases_cover_the_step_and_show_in_the_feedback(cpu_judge):
    result = cpu_judge.evaluate("vector_add", subs.VECTOR_ADD_TRITON + "\n# phases\n", "triton")
    assert result.status == "ok"
    assert {"compile", "worker_start", "load", "correctness", "gpu_wait"} <= set(result.phases)
    assert all(s >= 0 for s in result.phases.values())
    assert sum(result.phases.values()) <= result.wall_s
    assert "Judged in" in render_feedback(result, clocks=True) and "Judged in" not in render_feedback(result)


def test_a_wait_for_the_gpu_lock_is_its_own_phase_not_the_enclosing_ones(monkeypatch):
    """12 and 16 slots of a batch were slower than 8 with the cores and the GPU idle (H200, 2026-11-28): the waits
    for the GPU lock hid inside `correctness`. A fake clock: 3 s to take the lock, 1 s holding it."""
    import contextlib
    from types import SimpleNamespace

    from kerneldojo import judge as judge_module

    clock = [0.0]
    monkeypatch.setattr(judge_module.time, "perf_counter", lambda: clock[0])

    @contextlib.contextmanager
    def taken_after(seconds):
        clock[0] += seconds
        yield

    result = SimpleNamespace(phases={})
    with judge_module._phase(result, "correctness"), judge_module._waited(result, taken_after(3.0), "correctness"):
        clock[0] += 1.0
    assert result.phases == {"gpu_wait": 3.0, "correctness": 1.0}


def test_median_interval_brackets_the_median_and_narrows_with_runs():
    few, many = [1.0, 1.2, 0.9, 1.1, 1.05], [1.0, 1.2, 0.9, 1.1, 1.05] * 40
    for times in (few, many):
        stats = summarize(times)
        assert stats.ci_low_ms <= stats.median_ms <= stats.ci_high_ms
    assert median_ci(many)[1] - median_ci(many)[0] < median_ci(few)[1] - median_ci(few)[0]
    assert median_ci([2.0]) == (2.0, 2.0)


def test_identical_submission_is_reused_unless_retimed(tmp_path):
    from kerneldojo.judge import Judge, ResultCache

    judge = Judge("cpu", result_cache=tmp_path)
    source = subs.VECTOR_ADD_TRITON + "\n# cached\n"
    first = judge.evaluate("vector_add", source, "triton")
    again = judge.evaluate("vector_add", source, "triton")
    assert first.status == again.status == "ok" and not first.reused and again.reused and again == first
    assert "Reused" in render_feedback(again, clocks=True)
    assert not judge.evaluate("vector_add", source, "triton", retime=True).reused
    # Another source, task or judge setting is another key; a machine-made failure is never stored.
    assert not judge.evaluate("vector_add", source + "# other\n", "triton").reused
    assert not Judge("cpu", result_cache=tmp_path, seeds=2).evaluate("vector_add", source, "triton").reused
    hang = "import time\n\ndef solution(x, y):\n    time.sleep(60)\n"
    limited = Judge("cpu", result_cache=tmp_path, limits={"run": 1, "compile": 0})
    timeouts = [limited.evaluate("vector_add", hang, "python") for _ in range(2)]
    assert [r.status for r in timeouts] == ["timeout", "timeout"] and not timeouts[1].reused
    assert "float32" in timeouts[0].messages[0] and "A run may take 1 s here" in timeouts[0].messages[0]
    stored = list(ResultCache(tmp_path).folder.rglob("*.json"))
    assert len(stored) == 3 and all('"status":"ok"' in p.read_text() for p in stored)


def test_a_flag_raised_while_the_submission_ran_is_judged_again(tmp_path):
    """Red team round 65: a flag can hang on the draw of inputs (two seeds whose outputs collide: `same_output`) or
    on the machine; stored, it kept an honest kernel's -1 for every resubmission of its source."""
    from kerneldojo.judge import Judge

    judge = Judge("cpu", result_cache=tmp_path)
    source = "import torch\n\ndef solution(x, y):\n    return torch.add(x, y)\n# flagged\n"
    results = [judge.evaluate("vector_add", source, "python") for _ in range(2)]
    assert [(r.status, r.reused) for r in results] == [("flagged", False), ("flagged", False)], results
    assert not list(tmp_path.rglob("*.json"))


def test_a_build_stopped_by_a_limit_or_a_signal_is_judged_again(tmp_path):
    """Red team round 66: a confined build killed by SIGKILL (the host's OOM killer, or anything outside) was a plain
    compile error, stored for good against an honest source; now, like the wall-clock backstop, never stored."""
    from kerneldojo.graders.compile import TransientCompileError
    from kerneldojo.judge import Judge

    judge = Judge("cpu", result_cache=tmp_path)

    def killed(*args):
        raise TransientCompileError("nvcc was stopped building vector_add (cuda, float32): ... or was killed")

    judge._grade = killed
    results = [judge.evaluate("vector_add", subs.VECTOR_ADD_CUDA + "// killed\n", "cuda") for _ in range(2)]
    assert [(r.status, r.reused) for r in results] == [("compile_error", False)] * 2


def test_a_timed_ok_is_stored_only_where_the_evidence_pass_ran(tmp_path):
    """Red team round 31: with the sampled evidence pass, an `ok` from a step the pass skipped was stored and paid on
    every resubmission of the same source, so a cheat it catches one step in eight needed one lucky step."""
    from kerneldojo.judge import Judge
    from kerneldojo.result import Evidence

    judge = Judge("cpu", result_cache=tmp_path)
    judge.timed, judge.evidence = True, "sampled"  # as on a GPU; the steps below are the judge's own outcomes
    drawn = []
    judge._grade = lambda task, source, language, result, *how: setattr(
        result, "evidence", Evidence(case="n=1", claimed_ms=1.0) if drawn else None)
    source = subs.VECTOR_ADD_TRITON + "\n# sampled\n"
    assert [judge.evaluate("vector_add", source, "triton").reused for _ in range(2)] == [False, False]
    drawn.append(True)
    assert [judge.evaluate("vector_add", source, "triton").reused for _ in range(2)] == [False, True]


@pytest.mark.parametrize("outcome", ["a pass that decided nothing", "evidence_failed", "time_disagrees"])
def test_no_verdict_the_pass_left_open_or_the_machine_may_have_caused_is_stored(tmp_path, outcome):
    """Red team rounds 36 and 37: an `ok` whose pass only noted why it decided nothing was stored (and served to every
    resubmission), and a flag of the pass (a replay that died twice; ncu's durations stretched by other judges'
    kernels), which the machine can cause, stored its fine for good."""
    from kerneldojo.graders.checks import Flagged
    from kerneldojo.judge import Judge
    from kerneldojo.result import Evidence

    judge = Judge("cpu", result_cache=tmp_path)
    judge.timed, judge.evidence = True, "sampled"

    def grade(task, source, language, result, *how):
        result.evidence = Evidence(case="n=1", claimed_ms=1.0, one_in=8)
        if outcome != "a pass that decided nothing":  # a flag of the pass: the machine may have caused it (round 37)
            raise Flagged({outcome: f"{outcome}: the replay died twice, or other judges' kernels stretched ncu's"})
        result.evidence.note = "no evidence pass: ncu failed"

    judge._grade = grade
    source = subs.VECTOR_ADD_TRITON + f"\n# {outcome}\n"
    results = [judge.evaluate("vector_add", source, "triton") for _ in range(2)]
    assert [r.status for r in results] == ["ok" if outcome == "a pass that decided nothing" else "flagged"] * 2
    assert [r.reused for r in results] == [False, False]


def test_run_limit_follows_the_reference(cpu_judge):
    from kerneldojo.judge import RUN_LIMIT
    from kerneldojo.tasks import get_task

    limits = cpu_judge._limits_for(get_task("vector_add"))
    assert limits["run"] >= RUN_LIMIT["cpu"][0] and limits["compile"] > 0


def test_pool_reports_throughput_phases_and_reuse(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELDOJO_RESULT_CACHE", "on")
    monkeypatch.setenv("KERNELDOJO_CACHE", str(tmp_path))
    from kerneldojo.batch.pool import GPUPool

    source = subs.VECTOR_ADD_TRITON + "\n# pool\n"
    with GPUPool("cpu:1", coalesce=False) as pool:
        first = pool.submit("vector_add", source).result()
        again = pool.submit("vector_add", source).result()
        stats = pool.stats.summary()
    assert first.status == again.status == "ok" and again.reused and "queue" in first.phases
    assert stats["evaluations"] == 2 and stats["reused"] == 1 and stats["evaluations_per_hour"] > 0
    assert abs(sum(stats["phase_share"].values()) - 1) < 1e-6 and "evaluations" in pool.report()


def test_gpu_lock_lets_checks_share_and_timing_wait():
    import threading

    from kerneldojo.sandbox.gpu_lock import GPULock

    lock, order = GPULock(), []
    with lock.shared(), lock.shared():  # two checks at once
        timing = threading.Thread(target=lambda: lock.exclusive().__enter__() or order.append("timed"))
        timing.start()
        timing.join(0.2)
        order.append("checks done")
    timing.join(5)
    assert order == ["checks done", "timed"]


def test_gpu_lock_holds_across_judges_of_other_processes(tmp_path, monkeypatch):
    """Two locks of one key stand for two processes' judges: only the file lock joins them."""
    import threading

    from kerneldojo.sandbox.gpu_lock import GPULock

    monkeypatch.setenv("KERNELDOJO_GPU_LOCKS", str(tmp_path))
    mine, theirs, order = GPULock("gpu-test"), GPULock("gpu-test"), []

    def check():
        with theirs.shared():
            order.append("their check")

    with mine.exclusive():
        other = threading.Thread(target=check)
        other.start()
        other.join(0.3)
        order.append("my timing done")
    other.join(5)
    assert order == ["my timing done", "their check"]
    with mine.shared(), theirs.shared():  # checks of both share the GPU
        pass
    with mine.profiler():  # one Nsight Compute replay at a time
        other = threading.Thread(target=lambda: theirs.profiler().__enter__() or order.append("their replay"))
        other.start()
        other.join(0.3)
        order.append("my replay done")
    other.join(5)
    assert order[2:] == ["my replay done", "their replay"]


@pytest.mark.parametrize("across", [False, True], ids=["threads", "processes"])
def test_a_timing_waits_out_a_long_hold_without_holding_checks_back(tmp_path, monkeypatch, across):
    """An evidence replay's seconds-long hold and a timing waiting on it kept every check of the GPU out: the GPU
    sat idle (a batch of 4 slots, H200, 2026-11-28). Two locks of one key stand for two processes' judges."""
    import threading

    from kerneldojo.sandbox.gpu_lock import GPULock

    monkeypatch.setenv("KERNELDOJO_GPU_LOCKS", str(tmp_path))
    mine = GPULock("gpu-test") if across else GPULock()
    theirs, order = GPULock("gpu-test") if across else mine, []

    def timing():
        with theirs.exclusive():
            order.append("timed")

    with mine.shared(long=True):
        waiting = threading.Thread(target=timing)
        waiting.start()
        waiting.join(0.3)
        with theirs.shared():  # a check while the timing waits on the long hold
            order.append("check")
        order.append("long hold done")
    waiting.join(5)
    assert order == ["check", "long hold done", "timed"]
    with theirs.exclusive():  # and a long hold waits for a timing, as a check does
        later = threading.Thread(target=lambda: mine.shared(long=True).__enter__() or order.append("long after"))
        later.start()
        later.join(0.3)
        order.append("timed again")
    later.join(5)
    assert order[3:] == ["timed again", "long after"]


def test_another_processs_overlapping_long_holds_do_not_starve_a_timing(tmp_path, monkeypatch):
    """Red team round 98: flock lets new shared holds pass a waiting exclusive one, so one judge process's slots,
    their long holds overlapping, kept another process's timing out for as long as they went on."""
    import threading

    from kerneldojo.sandbox.gpu_lock import GPULock

    monkeypatch.setenv("KERNELDOJO_GPU_LOCKS", str(tmp_path))
    theirs, mine, timed, stop = GPULock("gpu-test"), GPULock("gpu-test"), [], threading.Event()

    def their_slot():
        while not stop.is_set():
            with theirs.shared(long=True):
                time.sleep(0.4)

    slots = [threading.Thread(target=their_slot) for _ in range(2)]
    slots[0].start()
    time.sleep(0.2)
    slots[1].start()  # from now on their holds overlap, for as long as `stop` is not set

    def timing():
        with mine.exclusive():
            timed.append(True)

    waiting = threading.Thread(target=timing, daemon=True)
    waiting.start()
    waiting.join(30)  # a deadline against a hang, not a figure: starved, it waits for as long as their holds go on
    stop.set()
    for slot in slots:
        slot.join(5)
    assert timed, "the timing never got the GPU while the other process's long holds went on"


@pytest.mark.parametrize("refused_file", ["long", "lock"])
def test_a_timing_that_fails_to_take_the_lock_leaves_the_checks_free(tmp_path, monkeypatch, refused_file):
    """Red team round 98: an `exclusive()` that raised while it waited (a caller's timeout, a lock folder removed)
    left a waiting count behind, and every later check of the process waited on it for ever."""
    import threading

    from kerneldojo.sandbox import gpu_lock

    monkeypatch.setenv("KERNELDOJO_GPU_LOCKS", str(tmp_path))
    lock = gpu_lock.GPULock("gpu-test")
    real = gpu_lock._flocked

    def refused(path, how):
        if path.name.endswith(f".{refused_file}"):
            raise RuntimeError("judge: cannot open the GPU lock file")
        return real(path, how)

    monkeypatch.setattr(gpu_lock, "_flocked", refused)
    with pytest.raises(RuntimeError, match="cannot open"), lock.exclusive():
        pass
    monkeypatch.setattr(gpu_lock, "_flocked", real)
    entered = []
    check = threading.Thread(target=lambda: lock.shared().__enter__() or entered.append(True), daemon=True)
    check.start()
    check.join(3)
    assert entered, "a check waited on the failed timing"
    with lock.shared(long=True), lock.shared():
        pass


# -- the JIT allowance ends with the JIT (protocol.PROGRESS) -----------------------------------------------------

# Returns, then hangs in the harness's own code once the call has returned (a profile hook it left on the worker's
# thread, at the harness's next step): in CPU mode, the stand-in for a GPU kernel that hangs after its launch
# returned (the worker's synchronize would wait on it). A reply no longer runs the submission's code as it is
# encoded (red team round 19), which the stand-in used before.
RETURNS_THEN_SPINS = """
import sys


def _hang_in_the_harness(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "_inspect":
        while True:
            pass


def solution(x, y):
    sys.setprofile(_hang_in_the_harness)
    return x + y
"""
SPINS_BEFORE_RETURNING = "def solution(x, y):\n    while True:\n        pass\n"


def test_a_hang_after_the_first_call_returned_gets_the_run_limit_not_the_jit_allowance():
    from kerneldojo.judge import Judge

    judge = Judge("cpu", limits={"run": 2, "compile": 120}, result_cache=None)
    result = judge.evaluate("vector_add", RETURNS_THEN_SPINS, "python")
    assert result.status == "timeout", result.messages
    assert "ran past its 2 s limit after its first call returned" in result.messages[0]
    assert result.wall_s < 120  # the JIT allowance was never waited out


def test_a_hang_inside_the_first_call_keeps_the_jit_allowance():
    from kerneldojo.judge import Judge

    judge = Judge("cpu", limits={"run": 1, "compile": 3}, result_cache=None)
    result = judge.evaluate("vector_add", SPINS_BEFORE_RETURNING, "python")
    assert result.status == "timeout", result.messages
    assert "ran past its 4 s limit;" in result.messages[0] and "returned" not in result.messages[0]
    assert result.phases["correctness"] >= 4  # a deadline never fires early


def _scripted_worker(frames):
    """A `process._Worker` whose far end is this test: it answers each request with the frames `frames(sequence)`."""
    import contextlib
    import socket
    import threading

    import torch

    from kerneldojo.sandbox import process
    from kerneldojo.sandbox.channel import Channel
    from kerneldojo.sandbox.protocol import READY, dumps, loads, recv_frame, send_frame

    class Worker(process._Worker):
        def __init__(self):
            judge_end, self.far = socket.socketpair()
            self.requests = self.replies = Channel(judge_end, torch.device("cpu"))
            send_frame(self.far, dumps((0, READY, None)))
            self.sequence = 0
            self.process = type("Alive", (), {"is_alive": lambda _: True, "exitcode": None})()

        def _kill(self):
            pass

        def stop(self):
            self.replies.close()

        def _tail_note(self):
            return ""

    worker = Worker()

    def answer():
        with contextlib.suppress(EOFError, OSError):
            while True:
                sequence, _, _ = loads(recv_frame(worker.far, fds=True), torch.device("cpu"), lambda *_: None)
                for frame in frames(sequence):
                    send_frame(worker.far, dumps(frame))

    threading.Thread(target=answer, daemon=True).start()
    return worker


def test_progress_frames_only_shorten_a_run_and_extra_or_forged_ones_are_flagged():
    import pytest

    from kerneldojo.graders.checks import Flagged
    from kerneldojo.sandbox.protocol import PROGRESS, SubmissionTimeout

    def progress_then_ok(seq):
        return [(seq, PROGRESS, None), (seq, "ok", "done")]

    assert _scripted_worker(progress_then_ok).call("run", (), 30, after_progress_s=30) == "done"
    with pytest.raises(SubmissionTimeout, match=r"0\.2 s limit after its first call returned"):  # shortened
        _scripted_worker(lambda seq: [(seq, PROGRESS, None)]).call("run", (), 60, after_progress_s=0.2)
    with pytest.raises(SubmissionTimeout, match=r"0\.5 s limit;"):  # never lengthened
        _scripted_worker(lambda seq: [(seq, PROGRESS, None)]).call("run", (), 0.5, after_progress_s=60)
    forged = {
        "on a request that allows none": (lambda seq: progress_then_ok(seq), {}),
        "past the cap": (lambda seq: [(seq, PROGRESS, None), *progress_then_ok(seq)], {"after_progress_s": 30}),
        "for another request": (lambda seq: [(seq + 1, PROGRESS, None), (seq, "ok", 1)], {"after_progress_s": 30}),
    }
    for case, (frames, kwargs) in forged.items():
        with pytest.raises(Flagged) as caught:
            _scripted_worker(frames).call("run", (), 30, **kwargs)
        assert "timing_channel" in caught.value.checks, case
    # Two replies to one request, the second refused by the channel before the next request: that request finds
    # the channel closed, and says forged, not the submission's runtime error (it raced the other way in CI).
    twice = _scripted_worker(lambda seq: [(seq, "ok", 1), (seq, "ok", 1)])
    assert twice.call("run", (), 30) == 1
    assert twice.replies.closed.wait(10) and twice.replies.forged
    with pytest.raises(Flagged) as caught:
        twice.call("flags", (), 30)
    assert "timing_channel" in caught.value.checks


def test_a_gpu_lock_file_that_cannot_be_opened_is_named(tmp_path, monkeypatch):
    from kerneldojo.sandbox.gpu_lock import GPULock

    monkeypatch.setenv("KERNELDOJO_GPU_LOCKS", str(tmp_path))
    (tmp_path / "gpu-test.turnstile").mkdir()  # what another user's or a broken set-up could leave there
    with pytest.raises(RuntimeError, match=r"GPU lock file .*KERNELDOJO_GPU_LOCKS"), GPULock("gpu-test").shared():
        pass
