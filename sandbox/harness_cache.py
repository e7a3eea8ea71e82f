"""The harness's compiled Triton kernels (the host gate, the L2 flush, the compile barrier, the warm-up's fill),
made once per judge process and device, handed to every GPU worker to seed its private Triton cache.

Each worker compiled them at its start into a cache of its own (`TRITON_CACHE_DIR` in its scratch tmpfs): ptxas
and Triton's C launcher built with the host compiler, seconds of every worker's start, on the path of a step whose
spare was not ready yet. Compiled here by a process that runs only kerneldojo's code (never a submission's), so
its files are the judge's own output; a worker gets a copy in its plan and cannot reach the original.

    python -m kerneldojo.sandbox.harness_cache cuda:0 FOLDER   # what `harness_triton_cache` runs
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

from .worker.environment import kept

CACHE_CAP_BYTES = 32 << 20  # the files together; more means something else was compiled: the seed is dropped
COMPILE_LIMIT_S = 300


@functools.cache
def harness_triton_cache(device_spec: str) -> dict[str, bytes]:
    """{path relative to the cache folder: contents}; empty where the compile fails (workers then compile it
    themselves, as before) or on the CPU (the interpreter compiles nothing)."""
    if device_spec == "cpu":
        return {}
    with tempfile.TemporaryDirectory(prefix="kerneldojo-harness-") as folder:
        environment = {**kept(dict(os.environ)), "TRITON_CACHE_DIR": folder, "PYTHONPATH": os.pathsep.join(sys.path)}
        try:
            # In the empty folder: `-m` puts the working folder first on the path, and a judge started in a source
            # checkout would import the checkout's tree, not the installed package (the GPU machine's first try).
            subprocess.run([sys.executable, "-m", "kerneldojo.sandbox.harness_cache", device_spec, folder],
                           env=environment, cwd=folder, check=True, capture_output=True, timeout=COMPILE_LIMIT_S)
        except (OSError, subprocess.SubprocessError) as e:
            detail = getattr(e, "stderr", b"") or b""
            warnings.warn(f"the harness's Triton kernels did not compile ahead ({e}; {detail[-500:]!r}): each GPU "
                          "worker compiles them at its start", RuntimeWarning, stacklevel=2)
            return {}
        files = {str(p.relative_to(folder)): p.read_bytes() for p in Path(folder).rglob("*")
                 if p.is_file() and not p.is_symlink()}
    return files if sum(map(len, files.values())) <= CACHE_CAP_BYTES else {}


if __name__ == "__main__":
    from kerneldojo.sandbox.device import resolve_device
    from kerneldojo.sandbox.worker.loop import compile_harness_kernels, launch_trivial_triton_kernel

    launch_trivial_triton_kernel(sys.argv[1])
    compile_harness_kernels(resolve_device(sys.argv[1]))
