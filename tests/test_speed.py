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
    assert "Judged in" in render_feedback(result)


def test_median_interval_brackets_the_median_and_narrows_with_runs():
    few, many = [1.0, 1.2, 0.9, 1.1, 1.05], [1.0, 1.2, 0.9, 1.1, 1.05] * 40
    for times in (few, many):
        stats = summarize(times)
        assert stats.ci_low_ms <= stats.median_ms <= stats.ci_high_ms
    assert median_ci(many)[1] - median_ci(many)[0] < median_ci(few)[1] - median_ci(few)[0]
    assert median_ci([2.0]) == (2.0, 2.0)
