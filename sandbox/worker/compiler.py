"""A compiler process confined as a worker is (runs inside the sandbox): nvcc, for the CUDA and CuTe builds.

    python sandbox/worker/compiler.py PLAN_JSON CPU_SECONDS FILE_BYTES -- nvcc ARGS...

The judge (`graders.compile`) starts this file by its path, so that nothing but the standard library and
`confine.py` is imported (no torch: a build pays a Python start-up, not an import). It sets the limits, then
`confine.enter`: a root of its own built from the allowlist (`Plan.root`), the build folder (`Plan.scratch`)
its only writable path besides a capped /tmp, no network, its own pid namespace (when the compiler
exits, every process it left is killed), no capabilities; then it runs the compiler. An `#include`
of a judge's file (a token, /etc/shadow) finds nothing. The first line it prints is what it could set up,
for the judge's log (`PROTECTIONS_PREFIX`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import signal
import sys
from multiprocessing.connection import Pipe
from pathlib import Path

PROTECTIONS_PREFIX = "kerneldojo-compiler-protections: "


def main(argv: list[str]) -> None:
    plan_json, cpu_s, file_bytes, separator, *command = argv
    if separator != "--" or not command:
        sys.exit("usage: compiler.py PLAN_JSON CPU_SECONDS FILE_BYTES -- COMMAND...")
    spec = importlib.util.spec_from_file_location("kerneldojo_compiler_confine", Path(__file__).with_name("confine.py"))
    confine = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # dataclasses look it up there
    spec.loader.exec_module(confine)
    # The compiler's processes inherit these: CPU time per process (a loaded machine does not inflate it), no core
    # dumps, no file past `file_bytes` (the library, nvcc's intermediates in /tmp).
    for limit, value in ((resource.RLIMIT_CPU, int(cpu_s)), (resource.RLIMIT_CORE, 0),
                         (resource.RLIMIT_FSIZE, int(file_bytes))):  # fmt: skip
        resource.setrlimit(limit, (value, value + 5 if limit == resource.RLIMIT_CPU else value))
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    control, _unread = Pipe()  # enter reports to a worker's judge through this; here it goes to the log line
    protections = confine.enter(confine.Plan(**json.loads(plan_json), control=control), lambda: None)
    print(PROTECTIONS_PREFIX + json.dumps(protections, default=str), file=sys.stderr, flush=True)
    os.environ["PATH"] = os.environ.get("PATH") or "/usr/bin:/bin"
    # This process is pid 1 of the build's pid namespace; the compiler is its child, so that the kernel's signals
    # (SIGXCPU past the CPU limit) reach it as they reach any process (pid 1 ignores those it has no handler for).
    # When it ends, so does this process, and with it every process the build left behind.
    compiler = os.fork()
    if compiler == 0:
        try:
            os.execv(command[0], command)
        finally:
            os._exit(127)
    confine._wait_and_mirror(compiler)


if __name__ == "__main__":
    main(sys.argv[1:])
