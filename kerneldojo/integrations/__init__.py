"""kerneldojo inside RL frameworks, as optional extras: `verifiers` (verifiers_env.py, `pip install
kerneldojo[verifiers]`) and OpenEnv (openenv_env.py, `pip install kerneldojo[openenv]`).

Both drive the same `KernelEnv` (env/kernel_env.py), so a framework's episode is judged, rewarded and
given feedback exactly as a gymnasium one: this module builds it, judged here or on a service.
"""

from __future__ import annotations

import functools

from kerneldojo.env.kernel_env import KernelEnv
from kerneldojo.judge import Judge


@functools.cache
def _local_judge(device: str) -> Judge:
    """One judge per device and process: its reference times and result cache serve every episode."""
    return Judge(device)


def kernel_env(task: str, *, language: str | None = None, device: str = "auto", remote: str | None = None,
               token: str | None = None, max_turns: int = 1) -> KernelEnv:
    """An episode of `task` that ends at the first correct kernel or after `max_turns` submissions, judged
    on this machine's `device`, or by the kerneldojo service at `remote` (env/remote.py) when given."""
    if remote is not None:
        return KernelEnv(task, language, max_turns=max_turns, stop_on_success=True, remote=remote, token=token)
    return KernelEnv(task, language, max_turns=max_turns, stop_on_success=True, judge=_local_judge(device))
