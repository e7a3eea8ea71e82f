"""Inside a submission's container (the docker backend): connect to the judge's socket, then serve the
same request loop as a process-backend worker. Nothing is shared with the judge but the socket, so
tensors and the build travel by value (`protocol.dumps`); the build is written under BUILD_DIR.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys

import torch

from .channel import WorkerEnd
from .loop import serve

IO_MOUNT = "/kd"  # in the container: the socket and output.txt
SOCKET_NAME = "judge.sock"
BUILD_DIR = "/tmp/submission"  # in the container: where the build is written


def main() -> None:
    """The container's command: connect to the judge, then serve the worker loop."""
    socket_path, device_spec = sys.argv[1], sys.argv[2]
    # The worker's setsid() needs a process that leads no group yet, and docker-init made this one a
    # group leader: the worker is a child, and this process passes on how it ended.
    pid = os.fork()
    if pid:
        _, status = os.waitpid(pid, 0)
        os._exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(socket_path)
    end = WorkerEnd(sock, torch.device(device_spec), BUILD_DIR)
    with contextlib.suppress(EOFError, BrokenPipeError):  # the judge went away
        serve(end, end, device_spec, IO_MOUNT, outputs_by_value=True)
