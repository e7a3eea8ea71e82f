import pytest

from kerneldojo.graders.reward import RewardConfig

R = RewardConfig()


def test_no_credit_without_correctness_and_flagged_below_failure():
    for status in ("compile_error", "runtime_error", "timeout", "wrong", "compiled"):
        assert R(status, 10.0) == R.failure
    assert R("flagged", 10.0) < R.failure


def test_monotone_in_speedup_and_clipped():
    speedups = [0.1, 0.5, 0.9, 1.0, 2.0, 8.0, 16.0, 100.0]
    rewards = [R("ok", s) for s in speedups]
    assert rewards == sorted(rewards)
    assert R("ok", 0.01) == R("ok", 0.5) > R.failure  # a slow correct kernel still beats a failure
    assert R("ok", 16.0) == R("ok", 1000.0) == pytest.approx(R.correct + R.speed_weight * 4)


def test_untimed_correct_gets_the_correctness_reward():
    assert R("ok", None) == R.correct
