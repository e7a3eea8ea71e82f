"""The gymnasium environment: one registered id per task, `kerneldojo/<task>-v0`."""

from __future__ import annotations

import gymnasium

from kerneldojo.tasks import list_tasks

from .kernel_env import KernelEnv

__all__ = ["KernelEnv", "register_all"]


def register_all() -> None:
    for task_id in list_tasks():
        env_id = f"kerneldojo/{task_id}-v0"
        if env_id not in gymnasium.registry:
            # No max_episode_steps: the env truncates at its own `max_turns`, which callers set.
            gymnasium.register(env_id, entry_point="kerneldojo.env.kernel_env:KernelEnv", kwargs={"task": task_id})


register_all()
