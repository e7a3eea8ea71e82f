"""kerneldojo: a gymnasium environment, a judge and a leaderboard for GPU kernels.

    import kerneldojo
    env = kerneldojo.make("softmax", language="triton")
    obs, info = env.reset()
    obs, reward, terminated, truncated, info = env.step(my_kernel_source)
    kerneldojo.evaluate("softmax", my_kernel_source)   # one EvalResult, no episode
"""

from __future__ import annotations

from kerneldojo.graders.reward import RewardConfig
from kerneldojo.result import EvalResult
from kerneldojo.tasks import get_task, list_tasks
from kerneldojo.version import __version__


def evaluate(task: str, source: str, language: str | None = None, device: str | None = "auto",
             retime: bool = False) -> EvalResult:
    """Compile, check and (on a GPU) time one submission. `language` is detected when None. An identical
    submission evaluated before returns its stored result (`reused=True`) unless `retime`."""
    from kerneldojo.judge import default_judge

    return default_judge(device).evaluate(task, source, language, retime=retime)


def make(task: str, **kwargs):
    """`gymnasium.make("kerneldojo/<task>-v0", **kwargs)`: language, device, max_turns, reward, ..."""
    import gymnasium

    get_task(task)  # an unknown name gets the nearest names, not gymnasium's registry error
    return gymnasium.make(f"kerneldojo/{task}-v0", **kwargs)


from kerneldojo import env  # noqa: E402, F401  (registers the environments; imports no judge, runs no reference.py)

__all__ = ["EvalResult", "RewardConfig", "__version__", "evaluate", "get_task", "list_tasks", "make"]
