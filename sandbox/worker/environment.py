"""The worker's environment, from an allowlist: a submission must not read the judge's secrets (a
service's KERNELDOJO_TOKENS, a trainer's API keys) from `os.environ` or from /proc/self/environ.

A spawned worker starts with the judge's whole environment. `scrub` runs first in the worker, before it
forks into the sandbox: it keeps the variables a worker needs (paths, CUDA, Triton, torch, locale), never
one whose name looks like a secret, and overwrites the process's initial environment block, which is what
/proc/self/environ shows and what every process forked from here inherits."""

from __future__ import annotations

import ctypes
import os
import re

KEPT = re.compile(
    r"PATH|LD_LIBRARY_PATH|PYTHONPATH|PYTHONHASHSEED|PYTHONDONTWRITEBYTECODE|HOME|USER|LANG|LANGUAGE|LC_\w+|TZ|TERM"
    r"|CUDA_\w+|NVIDIA_\w+|CUTLASS_\w+|TRITON_\w+|TORCH_\w+|TORCHINDUCTOR_\w+|PYTORCH_\w+|NCCL_\w+"
    r"|OMP_\w+|MKL_\w+|OPENBLAS_\w+|XDG_CACHE_HOME|KERNELDOJO_\w+")
SECRET = re.compile(r"TOKEN|SECRET|PASSW|KEY|CREDENTIAL|AUTH|COOKIE|SESSION|DSN|DATABASE|_URL$", re.I)


def kept(environ: dict[str, str]) -> dict[str, str]:
    return {name: value for name, value in environ.items() if KEPT.fullmatch(name) and not SECRET.search(name)}


def scrub() -> None:
    """Keep only the allowlisted variables, in os.environ, posix.environ and the initial block."""
    import posix

    keep = kept(dict(os.environ))
    os.environ.clear()  # unsetenv for each: libc's environ no longer points into the initial block
    posix.environ.clear()  # os.environ's source, which would still hold the judge's bytes
    _erase_initial_block()
    os.environ.update(keep)


def _erase_initial_block() -> None:
    """Zero the strings the kernel put on the stack at exec (env_start..env_end of /proc/self/stat)."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[-3]), int(fields[-2])  # env_start and env_end: fields 50 and 51 of proc(5)
    except (OSError, ValueError, IndexError):
        return
    if 0 < start < end and end - start < 1 << 24:
        ctypes.memset(start, 0, end - start)
