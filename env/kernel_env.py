"""`KernelEnv`: each step submits kernel source for one task and returns the judge's verdict."""

from __future__ import annotations

import math
import os
from typing import Any, ClassVar

import gymnasium as gym
from gymnasium import spaces

from kerneldojo.graders.compile import MAX_SOURCE_CHARS, LanguageError
from kerneldojo.graders.reward import RewardConfig
from kerneldojo.judge import Judge, versions
from kerneldojo.result import EvalResult
from kerneldojo.tasks import Task, get_task

from .feedback import render_feedback
from .spaces import SourceText

MAX_TEXT_CHARS = 1_000_000


class KernelEnv(gym.Env[dict, str]):
    """Write a GPU kernel for one task; each step submits a version and the judge grades it.

    ## Description
    One env per task (`kerneldojo/<task>-v0`, registered at `import kerneldojo`). The agent reads the
    prompt, the PyTorch reference and a naive starter, and answers with kernel source. The judge compiles
    it, runs it in a single-use sandboxed worker on inputs from secret seeds, compares with the
    reference and, on a GPU, times it against eager PyTorch and `torch.compile`.

    ## Action Space
    `SourceText(200_000)`: the submission's source, a `str` of Triton/Python, CUDA C++ or CuTe
    (the language is `language`, or detected from each submission when `language=None`).

    ## Observation Space
    `Dict`: `prompt` (instructions and the submission contract, text), `reference` (the task's
    reference.py, text), `starter` (a correct naive solution, text), `feedback` (the last verdict
    rendered for the agent: status, where the output differs, times and speedups; "" after reset),
    `turn` (`Discrete(max_turns + 1)`: submissions made so far).

    ## Rewards
    Per step, from `RewardConfig` (graders/reward.py; docs/rewards.md has the presets): 0 for a failure
    (compile error, runtime error, timeout, wrong output), −1 when an anti-cheat check fired, 1 for a
    correct kernel plus 0.5·log2(speedup over eager) clipped to [−1, 4] when it was timed (GPU only:
    CPU mode rewards correctness alone). On a GPU the evidence pass runs on one step in 8 drawn at random, and
    its flag scores `RewardConfig.audited(8)` (−29 by default): what the 7 unchecked steps could have paid, so a
    cheat it catches earns −1 in expectation. With an unbounded reward (kevin's) it runs on every step.
    That fine is an expectation over summed steps: a trainer that pays an episode one figure pays
    `info["episode_reward"]`, the step's reward capped by the lowest flagged step's of the episode (paid the last
    step alone, a cheat resubmits after a drawn step until a step is not drawn: red team round 42).

    ## Starting State
    `reset(seed=...)` starts a conversation at turn 0 with no feedback. The seed seeds only the env's
    own `np_random` (and the spaces' sampling): the observation after reset is the same whatever the
    seed. The judge's input seeds are secret and fresh every step, so no seed reproduces an
    evaluation's inputs or lets a submission learn them.

    ## Episode End
    Terminated when `stop_on_success` and a step ends `ok`; truncated after `max_turns` steps. A step
    after the end raises; call `reset()`.

    ## Arguments
    `task` (a library task's id, or a `Task` an adapter made), `language` (None: detect per submission),
    `device` ("auto", "cpu", "cuda:N"),
    `max_turns` (4), `reward` (a `RewardConfig`, its fields as a dict, or a preset's name: "kevin",
    "drkernel", "kernrl"), `stop_on_success` (False), `render_mode` ("ansi" returns the feedback),
    `limits` (seconds per worker request, e.g. `{"run": 10, "load": 60}`, and `memory` bytes and
    `processes`: `sandbox/protocol.py` LIMITS_S has the defaults), `isolation` ("process", "docker",
    "none"), `judge` (share one `Judge` between envs; then reward, limits and isolation are its), `retime`
    (False: a source identical to one judged before gets its stored result, `info["result"].reused`),
    `remote` and `token` (judge the steps on a kerneldojo service at that URL: env/remote.py), `feedback`
    ("text", or "profile": on a GPU each step also replays the largest bench case under Nsight Compute,
    summarised in the feedback, with the figures in `info["result"].ncu`; in CPU mode it says it cannot).

    ## Example
        >>> import gymnasium, kerneldojo
        >>> env = gymnasium.make("kerneldojo/vector_add-v0", device="cpu", max_turns=2)
        >>> obs, info = env.reset()
        >>> obs, reward, terminated, truncated, info = env.step(obs["starter"])
        >>> info["status"], reward
        ('ok', 1.0)
    """

    metadata: ClassVar[dict] = {"render_modes": ["ansi"]}

    def __init__(
        self,
        task: str | Task,
        language: str | None = None,
        device: str | None = "auto",
        max_turns: int = 4,
        reward: RewardConfig | dict | str | None = None,
        stop_on_success: bool = False,
        render_mode: str | None = None,
        judge: Judge | None = None,
        limits: dict[str, float] | None = None,
        isolation: str = "process",
        retime: bool = False,
        remote: str | None = None,
        token: str | None = None,
        feedback: str = "text",
    ):
        if max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        self.task = task if isinstance(task, Task) else get_task(task)
        self.task.reference  # noqa: B018  a broken reference.py fails here, naming the file
        if language is not None and not self.task.allows(language):
            raise ValueError(f"task {task!r} accepts {', '.join(self.task.spec.languages)}, not {language!r}")
        self.language = language
        self.max_turns, self.stop_on_success, self.render_mode = max_turns, stop_on_success, render_mode
        if remote is not None and (judge is not None or limits is not None or isolation != "process"):
            raise ValueError("remote= judges on a kerneldojo service, which sets its limits and isolation; "
                             "leave judge, limits and isolation unset")
        if feedback not in ("text", "profile"):
            raise ValueError(f"feedback is 'text' or 'profile' (Nsight Compute on a GPU), not {feedback!r}")
        if judge is not None and (reward is not None or limits is not None or isolation != "process"
                                  or feedback != "text"):
            raise ValueError("reward, limits, isolation and feedback configure the env's own judge; with judge= "
                             "set them on that Judge")
        if remote is not None:  # steps judged by a kerneldojo service at that URL (env/remote.py)
            from .remote import RemoteJudge

            judge = RemoteJudge(remote, token, reward=_reward_config(reward))
        # An RL loop steps millions of times: the evidence pass runs on a step in eight drawn at random (a cheat
        # cannot tell which), and its flag there costs what the other seven could have paid (`RewardConfig.audited`),
        # which needs a bounded reward: an unbounded one (kevin's) gets the pass on every step, as does
        # KERNELDOJO_EVIDENCE=always.
        config = _reward_config(reward) or RewardConfig()
        sampled = "sampled" if math.isfinite(config.max_reward) else "always"
        self.judge = judge or Judge(device, reward=config, limits=limits, isolation=isolation,
                                    profile=feedback == "profile",
                                    evidence=os.environ.get("KERNELDOJO_EVIDENCE") or sampled)
        self.retime = retime  # evaluate a source again even when an identical one's result is cached
        self.action_space = SourceText(MAX_SOURCE_CHARS)
        self.observation_space = spaces.Dict({
            "prompt": SourceText(MAX_TEXT_CHARS),
            "reference": SourceText(MAX_TEXT_CHARS),
            "starter": SourceText(MAX_TEXT_CHARS),
            "feedback": SourceText(MAX_TEXT_CHARS),
            "turn": spaces.Discrete(max_turns + 1),
        })  # fmt: skip
        self._turn, self._feedback, self._over = 0, "", False
        self._flagged_floor = math.inf  # the lowest reward of a flagged step this episode

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._turn, self._feedback, self._over = 0, "", False
        self._flagged_floor = math.inf
        return self._observation(), {"task": self.task.id, "language": self._starter_language()}

    def step(self, action: str):
        if not isinstance(action, str):
            raise TypeError(f"an action is kernel source as a str, got {type(action).__name__}")
        if self._over:  # terminated or truncated: more steps would keep paying rewards past the end (red team round 31)
            raise RuntimeError("the episode is over (it terminated or reached max_turns); call reset() first")
        self._turn += 1
        result = self._evaluate(action)
        self._feedback = render_feedback(result)
        terminated = self.stop_on_success and result.ok
        truncated = not terminated and self._turn >= self.max_turns
        self._over = terminated or truncated
        if result.status == "flagged":
            self._flagged_floor = min(self._flagged_floor, result.reward)
        info = {"result": result, "status": result.status, "turn": self._turn,
                "episode_reward": min(result.reward, self._flagged_floor)}
        return self._observation(), result.reward, terminated, truncated, info

    def render(self) -> str | None:
        return self._feedback if self.render_mode == "ansi" else None

    def _evaluate(self, source: str) -> EvalResult:
        try:
            return self.judge.evaluate(self.task, source, self.language, retime=self.retime)
        except LanguageError as e:  # a detected language this task does not take: the agent's mistake
            result = EvalResult(
                task=self.task.id, language=self.language or "unknown", device=self.judge.device.name,
                mode=self.judge.device.mode, status="compile_error", messages=[str(e)], versions=versions(),
            )  # fmt: skip
            result.reward = self.judge.reward(result.status, None)
            return result

    def _starter_language(self) -> str:
        return self.language or self.task.spec.languages[0]

    def _observation(self) -> dict:
        return {
            "prompt": self.task.instructions(self._starter_language()),
            "reference": self.task.reference_source,
            "starter": self.task.starter(self._starter_language()),
            "feedback": self._feedback,
            "turn": self._turn,
        }


def _reward_config(reward: RewardConfig | dict | str | None) -> RewardConfig | None:
    """`make(..., reward=...)` takes the config, its fields (`{"correct": 0.5}`) or a preset's name."""
    if isinstance(reward, str):
        return RewardConfig.preset(reward)
    return RewardConfig(**reward) if isinstance(reward, dict) else reward
