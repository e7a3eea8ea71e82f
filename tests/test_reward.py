import pytest

from kerneldojo.graders.reward import PRESETS, RewardConfig, discounted_returns

R = RewardConfig()
FAILURES = ("compile_error", "runtime_error", "timeout", "wrong", "compiled")
SPEEDUPS = [0.01, 0.1, 0.5, 0.8, 0.9, 1.0, 1.05, 1.5, 2.0, 3.0, 8.0, 16.0, 100.0]
COVERAGES = [None, 0.0, 0.3, 1.0]


def test_no_credit_without_correctness_and_flagged_below_failure():
    for status in FAILURES:
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


def test_default_unchanged():
    assert (R.correct, R.speed_weight, R.log2_speedup_min, R.log2_speedup_max, R.failure, R.flagged) == (
        1.0, 0.5, -1.0, 4.0, 0.0, -1.0,
    )  # fmt: skip
    assert RewardConfig.preset("kerneldojo") == R
    assert R("ok", 2.0) == pytest.approx(1.5)
    assert R("ok", 4.0) == pytest.approx(2.0)
    assert R("ok", 0.25) == pytest.approx(0.5)  # clipped at log2 = -1
    assert R("ok", 2.0, 0.1) == R("ok", 2.0, 1.0) == R("ok", 2.0)  # coverage does not enter the default
    assert R("compile_error", None) == 0.0 and R("flagged", None) == -1.0


def test_kevin_by_hand():
    """0.3 * 1{correct} + speedup * 1{correct}; no cap."""
    kevin = RewardConfig.preset("kevin")
    assert kevin("ok", 1.0) == pytest.approx(1.3)
    assert kevin("ok", 2.5) == pytest.approx(2.8)
    assert kevin("ok", 0.5) == pytest.approx(0.8)
    assert kevin("ok", 100.0) == pytest.approx(100.3)
    assert kevin("ok", None) == pytest.approx(0.3)  # correct, not timed: the correctness term alone
    for status in FAILURES:
        assert kevin(status, 3.0) == 0.0
    assert kevin("flagged", 3.0) == -1.0
    assert kevin.gamma == 0.4
    assert RewardConfig.preset("kevin", speedup_max=10.0)("ok", 100.0) == pytest.approx(10.3)


def test_drkernel_by_hand():
    """0.5 * 1{correct} + 0.5 * min(speedup, 3) + 0.5 * coverage, the last two only when correct."""
    drk = RewardConfig.preset("drkernel")
    assert drk("ok", 2.0, 0.8) == pytest.approx(0.5 + 1.0 + 0.4)
    assert drk("ok", 5.0, 1.0) == pytest.approx(0.5 + 1.5 + 0.5)
    assert drk("ok", 3.0, 0.0) == drk("ok", 30.0, 0.0) == pytest.approx(2.0)
    assert drk("ok", 0.5) == pytest.approx(0.75)  # not profiled: coverage counts 0
    assert drk("ok", 0.5, 0.2) == pytest.approx(0.85)
    assert drk("ok", None, 0.6) == pytest.approx(0.8)
    for status in FAILURES:
        assert drk(status, 2.0, 0.9) == 0.0
    assert drk("flagged", 2.0, 1.0) == -1.0


def test_kernrl_by_hand():
    """The examples of OpenEnv's envs/kernrl/README.md, plus our status mapping."""
    kr = RewardConfig.preset("kernrl")
    assert kr("compile_error", None) == pytest.approx(-0.5)
    for status in ("runtime_error", "timeout", "wrong", "compiled"):
        assert kr(status, 2.0) == pytest.approx(-0.25)
    assert kr("ok", 0.8) == pytest.approx(-0.1)
    assert kr("ok", 1.0) == pytest.approx(0.0)
    assert kr("ok", 1.5) == pytest.approx(0.5)
    assert kr("ok", 3.0) == kr("ok", 10.0) == pytest.approx(2.0)
    assert kr("ok", None) == 0.0
    assert kr("flagged", 5.0) == -1.0


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_monotone_in_speedup(name):
    reward = RewardConfig.preset(name)
    for coverage in COVERAGES:
        rewards = [reward("ok", s, coverage) for s in SPEEDUPS]
        assert rewards == sorted(rewards), (name, coverage)
    for s in SPEEDUPS:  # and never less for more of the GPU time in the submission's kernels
        by_coverage = [reward("ok", s, c) for c in (0.0, 0.3, 1.0)]
        assert by_coverage == sorted(by_coverage)


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_puts_flagged_below_every_honest_outcome(name):
    reward = RewardConfig.preset(name)
    honest = [reward(status, s, c) for status in (*FAILURES, "ok") for s in (*SPEEDUPS, None) for c in COVERAGES]
    assert reward("flagged", 100.0, 1.0) < min(honest)
    assert reward("flagged", 100.0) < reward.failure


@pytest.mark.parametrize("name", list(PRESETS))
def test_presets_round_trip_and_take_overrides(name):
    reward = RewardConfig.preset(name)
    assert RewardConfig.model_validate(reward.model_dump()) == reward
    assert RewardConfig.model_validate_json(reward.model_dump_json()) == reward
    assert RewardConfig(formula=name) == reward
    assert RewardConfig.preset(name, flagged=-7.0).flagged == -7.0


def test_flagged_must_stay_below_failure():
    with pytest.raises(ValueError, match="flagged"):
        RewardConfig(flagged=0.0)
    with pytest.raises(ValueError, match="flagged"):
        RewardConfig.preset("kernrl", flagged=-0.4)  # above its compile-error penalty
    with pytest.raises(ValueError, match="unknown reward preset"):
        RewardConfig.preset("nope")


def test_positional_call_and_coverage_range():
    reward = RewardConfig.preset("drkernel")
    assert reward("ok", 2.0) == reward("ok", 2.0, None) == reward("ok", 2.0, coverage=None)
    with pytest.raises(ValueError, match="coverage"):
        reward("ok", 2.0, 1.5)


def test_discounted_returns_kevin_example():
    rewards = [0.0, 1.3, 2.8]  # wrong, then correct at 1.0x, then correct at 2.5x (Kevin scores)
    assert discounted_returns(rewards, 0.4) == pytest.approx([0.4 * (1.3 + 0.4 * 2.8), 1.3 + 0.4 * 2.8, 2.8])
    assert discounted_returns(rewards, 0.4) == pytest.approx([0.968, 2.42, 2.8])
    assert discounted_returns(rewards, 1.0) == pytest.approx([4.1, 4.1, 2.8])
    assert discounted_returns([], 0.4) == []
    with pytest.raises(ValueError):
        discounted_returns(rewards, 1.5)


@pytest.mark.parametrize("name", list(PRESETS))
def test_a_cheat_a_sampled_check_catches_earns_flagged_in_expectation(name):
    """A check drawn on one step in n: the n - 1 unchecked steps at the most any step pays (the largest of every
    outcome tried, so max_reward is no underestimate), and the drawn one at `audited(n)`."""
    reward = RewardConfig.preset(name, speedup_max=RewardConfig.preset(name).speedup_max or 3.0)
    paid = max(reward(status, s, c) for status in (*FAILURES, "ok") for s in (*SPEEDUPS, 1e9, None) for c in COVERAGES)
    assert paid == pytest.approx(reward.max_reward)
    for n in (1, 2, 8, 64):
        expected = ((n - 1) * reward.max_reward + reward("flagged", 100.0, 1.0, audit_one_in=n)) / n
        assert expected == pytest.approx(reward.flagged)


def test_an_unbounded_reward_cannot_be_sampled():
    from kerneldojo.judge import Judge

    kevin = RewardConfig.preset("kevin")
    assert kevin.max_reward == float("inf")
    with pytest.raises(ValueError, match="needs a bounded reward"):
        kevin("flagged", None, audit_one_in=8)
    with pytest.raises(ValueError, match="speedup_max"):
        Judge("cpu", reward=kevin, evidence="sampled")


def test_a_results_reward_weighs_a_flag_of_the_sampled_evidence_pass():
    from kerneldojo.judge import versions
    from kerneldojo.result import EvalResult, Evidence

    result = EvalResult(task="t", language="triton", device="gpu", mode="gpu", status="flagged", versions=versions())
    assert R.of(result) == R.flagged  # a worker-side check: every step
    result.evidence = Evidence(one_in=8)
    assert R.of(result) == R.audited(8) == 8 * -1 - 7 * 3.0
    result.status, result.speedup = "ok", 2.0
    assert R.of(result) == R("ok", 2.0)  # a pass that found nothing changes nothing
