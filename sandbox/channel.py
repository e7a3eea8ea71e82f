"""The judge's end of a worker's socket, for both backends: `put(request)` and `get(timeout)`.

A writer thread sends (a worker that stops reading cannot block the judge past its limit) and a reader
thread receives and decodes (`protocol.loads`), so that a reply dripped in slowly, or half a frame
followed by silence, blocks only that thread: the caller's deadline still fires and kills the worker.
A frame longer than the pending request's reply may be (`cap`) is refused before it is read, and so is any frame
past the few a request may bring (its reply and `PROGRESS_CAP` progress frames): the bytes of each frame are capped,
and so is their number (red team round 38: a worker resending one maximal frame after its reply grew the judge by its
size each time, until the judge's next read). The worker's first frame is its `READY` (`protocol.READY`), nothing
else. EOF, a malformed reply, an oversized one or one too many closes the channel; the worker then counts as dead.
"""

from __future__ import annotations

import contextlib
import pickle
import queue
import socket
import threading

import torch

from .protocol import PROGRESS, PROGRESS_CAP, READY, READY_FRAME_BYTES, dumps, loads, recv_frame, reply_cap, send_frame


class Channel:
    def __init__(self, sock: socket.socket, device: torch.device, cuda_ipc: bool = False):
        self.sock, self.device, self.cuda_ipc = sock, device, cuda_ipc
        self.cap = reply_cap()  # set per request by `put`
        self.frames_left = 0  # what the pending request may still bring: its reply and its progress frames
        self.inbox: queue.Queue = queue.Queue()
        self.outbox: queue.Queue = queue.Queue()
        self.closed = threading.Event()
        self.ready = threading.Event()  # the worker's first frame came: it reads requests from now on
        self.error: str | None = None
        self.forged = False  # a frame past its request's allowance came: only a forger sends one
        threading.Thread(target=self._read, daemon=True, name="kerneldojo-channel-read").start()
        threading.Thread(target=self._write, daemon=True, name="kerneldojo-channel-write").start()

    def put(self, item, max_reply_bytes: int | None = None) -> None:
        self.cap = max_reply_bytes or reply_cap()
        self.frames_left = 1 + PROGRESS_CAP
        # Encoded now: later changes to the judge's tensors do not travel.
        self.outbox.put(dumps(item, self.cuda_ipc, share_fds=True))

    def get(self, timeout: float):
        try:
            return self.inbox.get(timeout=timeout)
        except queue.Empty:
            if self.closed.is_set():
                raise queue.Empty from None  # the caller asks is_alive() next
            raise

    def close(self) -> None:
        self.closed.set()
        self.outbox.put(None)
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()

    def _read(self) -> None:
        try:
            while True:
                data = recv_frame(self.sock, self._cap)
                item = loads(data, self.device)
                if not self.ready.is_set():
                    if item != (0, READY, None):
                        raise pickle.UnpicklingError("the worker's first frame was not its ready signal")
                    self.ready.set()
                    continue
                self.frames_left -= 1  # before the reply is handed over: the next request's `put` comes after
                if not (isinstance(item, tuple) and len(item) == 3 and item[1] == PROGRESS):
                    # A reply ends what its request may bring: a frame sent after it and before the next request is
                    # a forgery (red team round 71: the `flags` reply queued ahead, then the worker gone).
                    self.frames_left = 0
                self.inbox.put(item)
        except (EOFError, OSError):
            pass
        except Exception as e:  # a forged, broken or oversized reply; nothing in it was executed
            self.error = f"the worker sent a malformed reply ({type(e).__name__}: {e}); it was stopped"
        self.closed.set()

    def _cap(self) -> int:
        """Asked once a frame's header is in: the cap of the request sent while the reader waited."""
        if not self.ready.is_set():
            return READY_FRAME_BYTES
        if self.frames_left <= 0:
            self.forged = True
            raise pickle.UnpicklingError("a frame that no pending request asked for (a forged or repeated reply)")
        return self.cap

    def _write(self) -> None:
        while (data := self.outbox.get()) is not None:
            try:
                send_frame(self.sock, data)
            except OSError:
                return
