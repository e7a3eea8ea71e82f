"""Issue 14: the phase breakdown, the result cache, limits that fit the work, the timing's stopping rule.
No timing thresholds: these check what is recorded and decided, not how fast."""

import submissions as subs

from env.feedback import render_feedback
from kerneldojo.graders.timing import median_ci, summarize


def test_phases_cover_the_step_and_show_in_the_feedback(cpu_judge):
    result = cpu_judge.evaluate("vector_add", subs.VECTOR_ADD_TRITON + "\n# phases\n", "triton")
    assert result.status == "ok"
    assert {"compile", "worker_start", "load", "correctness"} <= set(result.phases)
    assert all(s >= 0 for s in result.phases.values())
    assert sum(result.phases.values()) <= result.wall_s
    assert "Judged in" in render_feedback(result, clocks=True) and "Judged in" not in render_feedback(result)


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

    from kerneldojo.batch.pool import GPULock

    lock, order = GPULock(), []
    with lock.shared(), lock.shared():  # two checks at once
        timing = threading.Thread(target=lambda: lock.exclusive().__enter__() or order.append("timed"))
        timing.start()
        timing.join(0.2)
        order.append("checks done")
    timing.join(5)
    assert order == ["checks done", "timed"]
