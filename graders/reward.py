"""Reward: no credit without correctness, then more for more speed, clipped.

Default (per step; a multi-turn episode's return is the trainer's choice of sum or discount):
    failed (compile_error, runtime_error, timeout, wrong)   -> `failure`  (0)
    flagged by an anti-cheat check                          -> `flagged`  (-1, below any honest failure)
    correct, not timed (CPU mode)                           -> `correct`  (1)
    correct and timed                                       -> `correct` + `speed_weight` * clip(log2(speedup), lo, hi)
    compiled but not run (CUDA in CPU mode)                 -> `failure`: nothing was shown correct
log2 makes 2x faster worth the same at any level; the lower clip keeps a slow correct kernel above
every failure when `speed_weight * -lo < correct`.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field


class RewardConfig(BaseModel):
    correct: float = 1.0
    speed_weight: float = 0.5
    log2_speedup_min: float = Field(-1.0, description="clip: slower than 2x slower earns no less")
    log2_speedup_max: float = Field(4.0, description="clip: faster than 16x earns no more")
    failure: float = 0.0
    flagged: float = -1.0

    def __call__(self, status: str, speedup: float | None) -> float:
        if status == "flagged":
            return self.flagged
        if status != "ok":
            return self.failure
        if speedup is None or speedup <= 0:
            return self.correct
        gain = min(max(math.log2(speedup), self.log2_speedup_min), self.log2_speedup_max)
        return self.correct + self.speed_weight * gain
