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

import contextlib
import importlib.util
import json
import os
import resource
import signal
import sys
from multiprocessing.connection import Pipe
from pathlib import Path

PROTECTIONS_PREFIX = "kerneldojo-compiler-protections: "
# The compiler's output that reaches the judge: its head and tail. A source can make nvcc print without end (a
# warning per expansion of a doubling macro, each quoting the expanded line: red team round 8 grew the judge by
# GBs from 718 characters); past OUTPUT_CAP_BYTES the build is stopped.
KEPT_BYTES, OUTPUT_CAP_BYTES = 64 << 10, 16 << 20


def main(argv: list[str]) -> None:
    plan_json, cpu_s, file_bytes, separator, *command = argv
    if separator != "--" or not command:
        sys.exit("usage: compiler.py PLAN_JSON CPU_SECONDS FILE_BYTES -- COMMAND...")
    spec = importlib.util.spec_from_file_location("kerneldojo_compiler_confine", Path(__file__).with_name("confine.py"))
    confine = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # dataclasses look it up there
    spec.loader.exec_module(confine)
    spec = importlib.util.spec_from_file_location("kerneldojo_compiler_filter", Path(__file__).with_name(
        "syscall_filter.py"))
    syscall_filter = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(syscall_filter)
    # The compiler's processes inherit these: CPU time per process (a loaded machine does not inflate it), no core
    # dumps, no file past `file_bytes` (the library, nvcc's intermediates in /tmp).
    for limit, value in ((resource.RLIMIT_CPU, int(cpu_s)), (resource.RLIMIT_CORE, 0),
                         (resource.RLIMIT_FSIZE, int(file_bytes))):  # fmt: skip
        resource.setrlimit(limit, (value, value + 5 if limit == resource.RLIMIT_CPU else value))
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    # No terminal and no input of the judge's: `#include "/dev/stdin"` or "/dev/tty" read what the operator typed.
    with contextlib.suppress(OSError):
        os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    control, _unread = Pipe()  # enter reports to a worker's judge through this; here it goes to the log line
    protections = confine.enter(confine.Plan(**json.loads(plan_json), control=control), lambda: None)
    syscall_filter.before_submission_code()  # inherited through exec: a build's processes reserve no disk either
    print(PROTECTIONS_PREFIX + json.dumps(protections, default=str), file=sys.stderr, flush=True)
    os.environ["PATH"] = os.environ.get("PATH") or "/usr/bin:/bin"
    # This process is pid 1 of the build's pid namespace; the compiler is its child, so that the kernel's signals
    # (SIGXCPU past the CPU limit) reach it as they reach any process (pid 1 ignores those it has no handler for).
    # When it ends, so does this process, and with it every process the build left behind.
    read_end, write_end = os.pipe()
    compiler = os.fork()
    if compiler == 0:
        try:
            os.close(read_end)
            os.dup2(write_end, 1)
            os.dup2(write_end, 2)
            os.execv(command[0], command)
        finally:
            os._exit(127)
    os.close(write_end)
    if _relay_bounded(read_end, compiler):  # stopped for its output, by this process: the source's doing, not a
        os.waitpid(compiler, 0)  # kill from outside (which the judge takes for the machine's and does not store)
        os._exit(1)
    confine._wait_and_mirror(compiler)


def _relay_bounded(fd: int, compiler: int) -> bool:
    """Copy the compiler's output to this process's stderr: its first and last KEPT_BYTES, and what was left out
    between; past OUTPUT_CAP_BYTES the compiler is killed (True) and the build fails."""
    head, tail, total, flooded = bytearray(), bytearray(), 0, False
    while chunk := os.read(fd, 1 << 16):
        total += len(chunk)
        room = max(0, KEPT_BYTES - len(head))
        head += chunk[:room]
        tail = (tail + chunk[room:])[-KEPT_BYTES:] if room < len(chunk) else tail
        if total > OUTPUT_CAP_BYTES:
            os.kill(compiler, signal.SIGKILL)
            tail += f"\n[the compiler printed more than {OUTPUT_CAP_BYTES >> 20} MiB: the build was stopped]\n".encode()
            flooded = True
            break
    os.close(fd)
    left_out = total - len(head) - len(tail)
    gap = f"\n[... {left_out} bytes of compiler output left out ...]\n".encode() if left_out > 0 else b""
    sys.stderr.buffer.write(bytes(head) + gap + bytes(tail))
    sys.stderr.flush()
    return flooded


if __name__ == "__main__":
    main(sys.argv[1:])
