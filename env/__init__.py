"""The gymnasium environment: one registered id per task folder, `kerneldojo/<task>-v0`.

Registering reads only the folder names: no task's reference.py runs and the judge is not imported
until an env is made (`gymnasium.make("kerneldojo/softmax-v0")` after `import kerneldojo`, or
`gymnasium.make("kerneldojo:kerneldojo/softmax-v0")`, which imports it first).
"""

from __future__ import annotations

import gymnasium

from kerneldojo.tasks import task_folders

__all__ = ["KernelEnv", "register_all"]


def register_all() -> None:
    for task_id in task_folders():
        env_id = f"kerneldojo/{task_id}-v0"
        if env_id not in gymnasium.registry:
            # No max_episode_steps: the env truncates at its own `max_turns`, which callers set.
            gymnasium.register(env_id, entry_point="kerneldojo.env.kernel_env:KernelEnv", kwargs={"task": task_id})
    for suite in ("kernelbench", "gpumode"):  # problems of other suites, from a path: kerneldojo.adapters.gym
        if f"kerneldojo/{suite}-v0" not in gymnasium.registry:
            gymnasium.register(f"kerneldojo/{suite}-v0", entry_point="kerneldojo.adapters.gym:SuiteEnv",
                               kwargs={"suite": suite})


def __getattr__(name: str):
    if name == "KernelEnv":  # imported on use: it imports the judge
        from .kernel_env import KernelEnv

        return KernelEnv
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


register_all()
