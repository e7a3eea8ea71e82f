"""Honest but unusual solutions: each must end `ok`. Anti-cheat checks that flag any of these
are too eager (a stream used properly is not a side-stream exploit; a workspace is not excess
memory; caching compiled kernels is not caching results)."""

from __future__ import annotations

import pytest
from adversarial_suite import cases, load

HONEST = load("honest", default_statuses=("ok",))


def test_there_are_enough_honest_solutions():
    assert len(HONEST) >= 20  # issue 13, item 11


@pytest.mark.parametrize(("sub", "mode"), cases(HONEST))
def test_honest_solution_passes(judge_for, sub, mode):
    judge = judge_for(mode)
    result = judge.evaluate(sub.task, sub.source, sub.language)
    assert result.status in sub.statuses, (result.status, result.checks_fired, result.messages)
    assert not result.checks_fired, result.checks_fired
    # Honest but slower than the reference still earns more than any failure.
    assert result.reward > judge.reward.failure, result.reward
