"""Reward: no credit without correctness, then more for more speed, clipped.

Default (`formula="kerneldojo"`; per step; a multi-turn episode's return is the trainer's choice of sum or discount):
    failed (compile_error, runtime_error, timeout, wrong)   -> `failure`  (0)
    flagged by an anti-cheat check                          -> `flagged`  (-1, below any honest failure)
    flagged by a check drawn on one step in n (sampled evidence) -> `audited(n)`: n * flagged - (n - 1) * max_reward
    correct, not timed (CPU mode)                           -> `correct`  (1)
    correct and timed                                       -> `correct` + `speed_weight` * clip(log2(speedup), lo, hi)
    compiled but not run (CUDA in CPU mode)                 -> `failure`: nothing was shown correct
log2 makes 2x faster worth the same at any level; the lower clip keeps a slow correct kernel above
every failure when `speed_weight * -lo < correct`. A check that runs on a random one step in n (the evidence pass
with `evidence="sampled"`) misses a cheat n - 1 times in n: its flag costs what those steps could have paid at most,
so a cheat it always catches earns in expectation no more than `flagged` (an unbounded reward cannot be sampled so:
the judge refuses that pairing).

Presets reproduce published rewards (`RewardConfig.preset(name)`; sources, status mapping and what
could not be verified: docs/rewards.md):
    kevin     0.3 * correct + speedup                      (Baronio et al. 2025, arXiv:2507.11948), gamma 0.4
    drkernel  0.5 * correct + 0.5 * min(speedup, 3) + 0.5 * coverage   (Liu et al. 2026, arXiv:2602.05885)
    kernrl    -0.5 compile error, -0.25 other failure, min(s - 1, 2) if s > 1 else 0.5 * (s - 1)
              (Meta OpenEnv, envs/kernrl)
Every preset puts `flagged` (-1) below its every honest outcome; none of the sources does so itself.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

Formula = Literal["kerneldojo", "kevin", "drkernel", "kernrl"]

# The values each preset sets; a field left out keeps the class default (the kerneldojo formula's).
# fmt: off
PRESETS: dict[str, dict[str, float | None]] = {
    "kerneldojo": {},
    "kevin": {"correct": 0.3, "speed_weight": 1.0, "speedup_max": None, "failure": 0.0, "flagged": -1.0, "gamma": 0.4},
    "drkernel": {
        "correct": 0.5, "speed_weight": 0.5, "speedup_max": 3.0, "coverage_weight": 0.5,
        "failure": 0.0, "flagged": -1.0, "gamma": 1.0,
    },
    "kernrl": {
        "correct": 0.0, "speed_weight": 1.0, "slower_weight": 0.5, "speedup_max": 3.0,
        "failure": -0.25, "compile_failure": -0.5, "flagged": -1.0,
    },
}
# fmt: on


class RewardConfig(BaseModel):
    formula: Formula = Field("kerneldojo", description="which formula scores a correct kernel; see PRESETS")
    correct: float = Field(1.0, description="earned by any correct kernel")
    speed_weight: float = Field(0.5, description="kerneldojo: on clipped log2(speedup); others: on speedup")
    log2_speedup_min: float = Field(-1.0, description="kerneldojo clip: slower than 2x slower earns no less")
    log2_speedup_max: float = Field(4.0, description="kerneldojo clip: faster than 16x earns no more")
    speedup_max: float | None = Field(None, description="kevin/drkernel/kernrl: speedup counted at most; None: no cap")
    slower_weight: float | None = Field(None, description="kernrl: on (speedup - 1) below 1x; None: speed_weight")
    coverage_weight: float = Field(0.0, description="drkernel: on the share of GPU time in the submission's kernels")
    failure: float = 0.0
    compile_failure: float | None = Field(None, description="for compile_error when it differs from `failure` (kernrl)")
    flagged: float = -1.0
    gamma: float | None = Field(None, description="the discount the source used across turns; not applied per step")

    @model_validator(mode="before")
    @classmethod
    def _preset_values(cls, data: Any) -> Any:
        """`RewardConfig(formula=name)` starts from that preset's values; fields given explicitly win."""
        if isinstance(data, dict) and data.get("formula") in PRESETS:
            return {**PRESETS[data["formula"]], **data}
        return data

    @model_validator(mode="after")
    def _flagged_below_failure(self) -> RewardConfig:
        failures = [self.failure] + ([self.compile_failure] if self.compile_failure is not None else [])
        if self.flagged >= min(failures):
            raise ValueError(f"flagged ({self.flagged}) must score below every honest failure ({min(failures)})")
        if self.gamma is not None and not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"gamma must lie in [0, 1], not {self.gamma}")
        return self

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> RewardConfig:
        """The published formula `name` (one of PRESETS), with any field overridden."""
        if name not in PRESETS:
            raise ValueError(f"unknown reward preset {name!r}; known: {', '.join(PRESETS)}")
        return cls(formula=name, **overrides)

    def __call__(self, status: str, speedup: float | None, coverage: float | None = None, audit_one_in: int = 1
                 ) -> float:  # fmt: skip
        """One step's reward. `coverage`: share (0..1) of profiled GPU time in the submission's own
        kernels, None when not profiled; only `drkernel` uses it, and counts None as 0. `audit_one_in`: a flag
        raised by a check drawn on one step in this many (`audited`)."""
        if coverage is not None and not 0.0 <= coverage <= 1.0:
            raise ValueError(f"coverage is a fraction in [0, 1], not {coverage}")
        if status == "flagged":
            return self.audited(audit_one_in) if audit_one_in > 1 else self.flagged
        if status != "ok":
            if status == "compile_error" and self.compile_failure is not None:
                return self.compile_failure
            return self.failure
        timed = speedup if speedup is not None and speedup > 0 else None
        return getattr(self, f"_{self.formula}")(timed, coverage)

    def of(self, result: Any) -> float:
        """An EvalResult's reward: its status, speedup and coverage, and a flag of the evidence pass weighed by the
        share of steps that pass is drawn on (`result.evidence.one_in`)."""
        audit = result.evidence.one_in if result.status == "flagged" and result.evidence is not None else 1
        return self(result.status, result.speedup, result.kernel_coverage, audit)

    @property
    def max_reward(self) -> float:
        """The most one step can earn (inf when the speedup is not capped: kevin's default)."""
        uncapped = self.speedup_max is None and self.formula != "kerneldojo"
        if uncapped and self.speed_weight > 0:
            return math.inf
        best = {"kerneldojo": lambda: self._kerneldojo(2.0 ** self.log2_speedup_max, None),
                "kevin": lambda: self._kevin(self.speedup_max or 0.0, None),
                "drkernel": lambda: self._drkernel(self.speedup_max or 0.0, 1.0),
                "kernrl": lambda: self._kernrl(self.speedup_max or 1.0, None)}[self.formula]()
        return max(best, self.correct, self.failure)

    def audited(self, one_in: int) -> float:
        """A flag from a check drawn on one step in `one_in`: a cheat it always catches earns, over the `one_in - 1`
        steps it is not drawn on, `max_reward` at most; this makes the expectation `flagged`."""
        if not math.isfinite(self.max_reward):
            raise ValueError("a sampled check needs a bounded reward: set speedup_max, or check every step")
        return one_in * self.flagged - (one_in - 1) * self.max_reward

    def _capped(self, speedup: float) -> float:
        return speedup if self.speedup_max is None else min(speedup, self.speedup_max)

    def _kerneldojo(self, speedup: float | None, coverage: float | None) -> float:
        if speedup is None:
            return self.correct
        gain = min(max(math.log2(speedup), self.log2_speedup_min), self.log2_speedup_max)
        return self.correct + self.speed_weight * gain

    def _kevin(self, speedup: float | None, coverage: float | None) -> float:
        return self.correct + (self.speed_weight * self._capped(speedup) if speedup is not None else 0.0)

    def _drkernel(self, speedup: float | None, coverage: float | None) -> float:
        speed = self.speed_weight * self._capped(speedup) if speedup is not None else 0.0
        return self.correct + speed + self.coverage_weight * (coverage or 0.0)

    def _kernrl(self, speedup: float | None, coverage: float | None) -> float:
        if speedup is None:
            return self.correct
        if speedup > 1.0:
            return self.correct + self.speed_weight * (self._capped(speedup) - 1.0)
        slower = self.speed_weight if self.slower_weight is None else self.slower_weight
        return self.correct + slower * (speedup - 1.0)


def discounted_returns(rewards: Sequence[float], gamma: float) -> list[float]:
    """Each step's return over one episode, G_t = sum over k >= t of gamma**(k - t) * r_k.

    The environment hands out per-step rewards only; this is for a trainer that wants Kevin's
    per-turn credit (gamma 0.4 in its `RewardConfig.preset("kevin").gamma`) or a plain sum (gamma 1).
    """
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must lie in [0, 1], not {gamma}")
    returns, following = [], 0.0
    for r in reversed(rewards):
        following = r + gamma * following
        returns.append(following)
    return returns[::-1]
