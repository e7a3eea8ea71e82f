"""The worker's end of its socket to the judge: a blocking `get` and `put` for `loop.serve`.

Requests are trusted and may carry the build, which is written into `build_dir` here; replies are
encoded by `protocol.dumps`, so nothing the worker sends names a class the judge would run.
"""

from __future__ import annotations

import socket
from pathlib import Path

import torch

from kerneldojo.sandbox.protocol import Build, dumps, loads, recv_frame, send_frame

from .watches import no_submission_hooks


class WorkerEnd:
    def __init__(self, sock: socket.socket, device: torch.device, build_dir: str, cuda_ipc: bool = False):
        self.sock, self.device, self.build_dir, self.cuda_ipc = sock, device, Path(build_dir), cuda_ipc

    def get(self):
        return loads(recv_frame(self.sock, fds=True), self.device, materialize=self._materialize)

    def put(self, item) -> None:
        try:
            with no_submission_hooks():  # the encoder's own tensor ops (detach) reach no mode a submission left
                data = dumps(item, self.cuda_ipc)
        except Exception as e:  # e.g. an output that cannot be pickled; keep the sequence number if any
            head = item[:-2] if isinstance(item, tuple) and len(item) >= 2 else ()
            data = dumps((*head, "runtime_error", f"the reply could not be sent: {type(e).__name__}: {e}"))
        send_frame(self.sock, data)

    def _materialize(self, fields: dict, source: bytes, libraries: dict[str, bytes], extensions: dict[str, bytes]
                     ) -> Build:  # fmt: skip
        """Write the build where the worker can read it, and point a Build there."""
        self.build_dir.mkdir(parents=True, exist_ok=True)
        source_path = self.build_dir / Path(fields["source_path"]).name
        source_path.write_bytes(source)
        paths = {}
        for dtype, data in libraries.items():
            paths[dtype] = self.build_dir / f"{dtype}-submission.so"
            paths[dtype].write_bytes(data)
        prebuilt = {}  # load_inline's: the module name, from the judge, names the file
        for name, data in extensions.items():
            prebuilt[name] = self.build_dir / f"{name}.so"
            prebuilt[name].write_bytes(data)
        return Build(**{**fields, "source_path": source_path, "libraries": paths, "extensions": prebuilt})
