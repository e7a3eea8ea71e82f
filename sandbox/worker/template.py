"""The worker template: a process that has imported what every worker needs and forks one per judge request, so
that a worker's start skips the interpreter, torch's and Triton's imports and the operator watch's torch._dynamo
(4-5 s of a GPU worker's 11-12 s on an H200, `baselines/bench/bench_worker_start.py`).

It is started like a worker (the allowlisted environment, none of the judge's modules or arguments), holds no CUDA
context (a CUDA context does not survive a fork: each worker makes its own), no secret and nothing of a submission:
it never runs one, and what the judge sends it (a scratch folder, a device, the plan of `worker.confine`) is what a
spawned worker was given too. The forked child closes the template's channel and then runs exactly what a spawned
worker runs (`loop.serve_socket`: its own confinement first). The template dies with the judge (its parent-death
signal) and each worker with the template; the judge kills a worker by the pidfd the template opened before it
could be reaped, and the template reports each exit status (`sandbox.process._Template`).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import pickle
import select
import signal
import socket
import sys
import traceback

MESSAGE_BYTES = 1 << 20  # a plan is kilobytes; a longer request fails whole (SOCK_SEQPACKET)
PR_SET_DUMPABLE = 4


def serve_template(sock: socket.socket) -> None:
    """The template's loop over its SOCK_SEQPACKET channel to the judge: ("fork", device, scratch, plan) pickled,
    with the worker's socket and control pipe as fds, in; ["forked", pid] with a pidfd of the child, and
    ["exit", pid, status] for each child it reaps, as JSON, out (the judge unpickles nothing of it)."""
    from .confine import _die_with_parent

    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the judge's Ctrl-C is the judge's: this one dies with it
    _warm()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # no process of this uid reads or traces its memory
    sock.send(json.dumps(["ready", os.getpid()]).encode())
    while True:
        _report_exits(sock)
        if not select.select([sock], [], [], 0.05)[0]:
            continue
        message, fds, _, _ = socket.recv_fds(sock, MESSAGE_BYTES, 2)
        if not message:  # the judge went away
            return
        try:
            _, device_spec, scratch, plan = pickle.loads(message)  # the judge's (a truncated one fails here)
            child = os.fork()
        except Exception as e:  # EAGAIN, ENOMEM: this worker is not made; the judge spawns it, the others run on
            child = None
            sock.send(json.dumps(["failed", 0, f"{type(e).__name__}: {e}"[:200]]).encode())
        if child == 0:
            sock.close()
            _run_worker(device_spec, scratch, plan, *fds)
        for fd in fds:
            os.close(fd)
        if child is None:
            continue
        pidfd = os.pidfd_open(child)  # before any wait here: the pid cannot be another process's yet
        try:
            socket.send_fds(sock, [json.dumps(["forked", child]).encode()], [pidfd])
        finally:
            os.close(pidfd)


def _warm() -> None:
    """What every worker imports and touches before its confinement, done once here: `loop` imports torch, Triton,
    the harness and the watches; the task library; the watch's first use imports torch._dynamo (on the CPU: no CUDA
    here)."""
    import torch

    from kerneldojo.tasks import list_tasks

    from . import loop  # noqa: F401
    from .watches import ForbiddenOps

    list_tasks()
    with ForbiddenOps(None):
        torch.empty(1)
    if torch.cuda.is_initialized():  # a fork of it would have a broken one
        raise SystemExit("kerneldojo worker template: CUDA was initialized while warming up")


def _run_worker(device_spec: str, scratch: str, plan, worker_fd: int, control_fd: int) -> None:
    """In the forked child: what a spawned worker runs, then its exit (never the template's loop again)."""
    code = 1
    try:
        import multiprocessing
        import secrets
        from multiprocessing.connection import Connection

        from .loop import serve_socket

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # as a spawned worker: its /proc its own
        multiprocessing.current_process().authkey = secrets.token_bytes(32)  # as a spawned one: its own (round 105)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        plan.control, plan.template_pid = Connection(control_fd), os.getppid()
        serve_socket(socket.socket(fileno=worker_fd), device_spec, scratch, plan)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        with contextlib.suppress(Exception):
            traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _report_exits(sock: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        sock.send(json.dumps(["exit", pid, status]).encode())
