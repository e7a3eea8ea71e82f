"""kerneldojo as a `verifiers` environment (verifiers 0.4, the `verifiers.v1` API; `pip install
kerneldojo[verifiers]`).

verifiers finds a taskset by id: `kerneldojo-verifiers` imports the top-level module `kerneldojo_verifiers`,
which re-exports this module's taskset and env:

    import verifiers.v1 as vf
    env = vf.load_environment(vf.resolve_env_config({
        "taskset": {"id": "kerneldojo-verifiers", "tasks": ["softmax"], "task": {"device": "auto"}},
        "max_turns": 4,
    }))
    # or verifiers' CLI: vf-eval kerneldojo-verifiers (the same fields as --env.* flags)

One task per kerneldojo task id. The model's reply is judged (its last fenced code block, or the whole reply):
reward and feedback are `KernelEnv`'s (env/kernel_env.py). With `max_turns` above 1 the judge's feedback
(env/feedback.py) is the next user message until a kernel is correct or the turns run out; the reward is
the last submission's. `task.remote` (and `task.token`) judge on a kerneldojo service instead of here.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import verifiers.v1 as vf
from pydantic import Field

from kerneldojo.integrations import kernel_env
from kerneldojo.tasks import get_task, list_tasks

__all__ = ["KernelData", "KernelDojoEnv", "KernelDojoEnvConfig", "KernelTask", "KernelTaskConfig",
           "KernelTaskset", "KernelTasksetConfig", "extract_source"]

_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)
INFO_KEY = "kerneldojo"  # trace.info[INFO_KEY]: the last submission's verdict


def extract_source(reply: str) -> str:
    """The submission in a model's reply: its last fenced code block, else the whole reply."""
    blocks = _FENCE.findall(reply)
    return blocks[-1] if blocks else reply


class KernelTaskConfig(vf.TaskConfig):
    device: str = "auto"
    """Where the local judge runs: "auto", "cpu" (correctness only, Triton interpreted) or "cuda:N"."""
    remote: str | None = None
    """A kerneldojo service's URL (`kerneldojo serve`): judge there instead of on this machine."""
    token: str | None = Field(None, repr=False)
    """The service's bearer token."""


class KernelTasksetConfig(vf.TasksetConfig):
    tasks: list[str] = Field(default_factory=list)
    """kerneldojo task ids (`kerneldojo tasks`); empty: every task."""
    language: str | None = None
    """The submissions' language ("triton", "cuda", "cute"); None: each task's first, detected per reply."""
    task: KernelTaskConfig = KernelTaskConfig()


class KernelData(vf.TaskData):
    kernel: str
    """The kerneldojo task id."""
    language: str | None = None


class KernelTask(vf.Task[KernelData, vf.State, KernelTaskConfig]):
    def episode(self, max_turns: int = 1):
        c = self.config
        return kernel_env(self.data.kernel, language=self.data.language, device=c.device, remote=c.remote,
                          token=c.token, max_turns=max_turns)  # fmt: skip

    @vf.reward
    async def judge(self, trace) -> float:
        """The reward of the reply's kernel: the env's run already judged it, else it is judged here."""
        source = extract_source(trace.last_reply)
        verdict = trace.info.get(INFO_KEY)
        if verdict is None or verdict["source"] != source:
            verdict = await judged(self.episode(), source)
            trace.info[INFO_KEY] = verdict
        return verdict["reward"]

    @property
    def key(self) -> str:
        return f"{self.data.kernel}:{self.data.language or 'auto'}"


async def judged(env, source: str) -> dict[str, Any]:
    """One step of a kernel env, off the event loop (the judge blocks while a worker runs the kernel)."""
    observation, _reward, terminated, truncated, info = await asyncio.to_thread(env.step, source)
    # The episode is paid its last verdict: that verdict's `episode_reward`, which a flagged turn before it caps (a
    # drawn evidence pass's fine, else rerolled away by resubmitting: red team round 42).
    return {"source": source, "reward": float(info["episode_reward"]), "status": info["status"],
            "feedback": observation["feedback"], "done": terminated or truncated}  # fmt: skip


class KernelTaskset(vf.Taskset[KernelTask, KernelTasksetConfig]):
    def load(self):
        ids = self.config.tasks or list_tasks()
        for task_id in ids:
            task = get_task(task_id)  # an unknown id fails here with the nearest names
            language = self.config.language or task.spec.languages[0]
            if not task.allows(language):
                raise ValueError(f"task {task_id!r} accepts {', '.join(task.spec.languages)}, not {language!r}")
            yield KernelTask(KernelData(name=task_id, kernel=task_id, language=self.config.language,
                                        prompt=prompt(task, language)), self.config.task)  # fmt: skip


def prompt(task, language: str) -> str:
    fence = "python" if language == "triton" else "cpp"
    return (f"{task.instructions(language)}\n\nThe PyTorch reference (reference.py):\n```python\n"
            f"{task.reference_source}\n```\n\nA correct but naive solution to start from:\n```{fence}\n"
            f"{task.starter(language)}\n```\n\nAnswer with your complete solution in one fenced code block.")


class KernelDojoEnvConfig(vf.EnvConfig):
    agent: vf.AgentConfig = vf.AgentConfig()
    max_turns: int = Field(1, ge=1)
    """Submissions per episode: 1 is single-turn; above 1 the judge's feedback is the next user message."""


class KernelDojoEnv(vf.Env[KernelDojoEnvConfig]):
    async def run(self, task: KernelTask, agents) -> None:
        await run_episode(task, agents.agent, self.config.max_turns)


async def run_episode(task: KernelTask, agent, max_turns: int) -> None:
    """The model answers the prompt; each answer is judged, and unless it is correct or the last turn, the
    judge's feedback is the next user message. Leaving the interaction scores the trace (`KernelTask.judge`),
    which finds the last answer's verdict in `trace.info` instead of judging it again."""
    env = task.episode(max_turns)
    env.reset()
    async with agent.interaction(task) as interaction:
        segment = await interaction.turn()
        while not segment.terminated:
            verdict = await judged(env, extract_source(segment.last_reply))
            interaction.trace.info[INFO_KEY] = verdict
            if verdict["done"]:
                break
            segment = await interaction.turn(verdict["feedback"])
