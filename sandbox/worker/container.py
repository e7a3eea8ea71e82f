"""Inside a submission's container (the docker backend): connect to the judge's socket, then serve the
same request loop as a process-backend worker. Nothing is shared with the judge but the socket, so
tensors and the build travel by value (`protocol.dumps`); the build is written under BUILD_DIR.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from pathlib import Path

import torch

from kerneldojo.sandbox.protocol import Build, dumps, loads, recv_frame, send_frame

from .loop import serve

IO_MOUNT = "/kd"  # in the container: the socket and output.txt
SOCKET_NAME = "judge.sock"
BUILD_DIR = "/tmp/submission"  # in the container: where the build is written


def _materialize(fields: dict, source: bytes, libraries: dict[str, bytes]) -> Build:
    """In the container: write the build where the worker can read it, and point a Build there."""
    folder = Path(BUILD_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    source_path = folder / Path(fields["source_path"]).name
    source_path.write_bytes(source)
    paths = {}
    for dtype, data in libraries.items():
        paths[dtype] = folder / f"{dtype}-submission.so"
        paths[dtype].write_bytes(data)
    return Build(**{**fields, "source_path": source_path, "libraries": paths})


class _WorkerEnd:
    """The worker's end: a blocking `get` and `put` for `loop.serve`."""

    def __init__(self, sock: socket.socket, device: torch.device):
        self.sock, self.device = sock, device

    def get(self):
        return loads(recv_frame(self.sock), self.device, materialize=_materialize)

    def put(self, item) -> None:
        try:
            data = dumps(item)
        except Exception as e:  # e.g. an output that cannot be pickled; keep the sequence number if any
            head = item[:-2] if isinstance(item, tuple) and len(item) >= 2 else ()
            data = dumps((*head, "runtime_error", f"the reply could not be sent: {type(e).__name__}: {e}"))
        send_frame(self.sock, data)


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
    end = _WorkerEnd(sock, torch.device(device_spec))
    with contextlib.suppress(EOFError, BrokenPipeError):  # the judge went away
        serve(end, end, device_spec, IO_MOUNT, outputs_by_value=True)
