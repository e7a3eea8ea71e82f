"""Sharing one GPU among judges (in the judge's processes): correctness checks share it, timings hold it alone.

A timing that overlaps another judge's kernels measures both: CUPTI's kernel intervals stretch under the
GPU's time-slicing while the CUDA events' median may not, and an honest kernel was flagged
`unsynchronized_stream` (busy time 2 to 4 times the timed time) with four judges' test processes on one H100
(2026-11-25). So the lock spans processes, not only a pool's threads: an `flock` on a file named by the GPU's
UUID (an index changes with CUDA_VISIBLE_DEVICES; the UUID does not). Workers cannot reach the file: they
have a /tmp of their own. A waiting timing keeps new checks out, in this process (a condition) and across
processes (a turnstile file every taker passes), so it is never starved.

A hold of seconds (an Nsight Compute replay, a reference's torch.compile) is `shared(long=True)`: a timing waits it
out, but the short checks of the other judges are not held back behind that waiting timing meanwhile. Writer
preference behind a long hold had stalled the whole GPU: in a batch of 4 slots on an H200 (2026-11-28) one slot's
evidence replay (10-20 s) with another's timing waiting on it kept every slot's checks out, the GPU idle (NVML's
utilization median 0), correctness 8 s per evaluation against 1 s for a judge alone. A timing first waits for the
long holds to end (a `long` lock file, taken shared by each long hold and alone by a timing, with a turnstile of its
own), and only then keeps new checks out; a long hold that comes while a timing waits queues behind it, in any
process.

Nsight Compute replays (the evidence pass, profile feedback) also run one at a time per GPU (`profiler`): ncu
serializes its sessions with a lock file in /tmp, and each worker has a /tmp of its own, so concurrent replays
met on the GPU's counters and were killed (ncu exit 9, no output: three honest kernels failed the evidence pass
with four judges on one H100, 2026-11-25, as did 4 of 13 correct submissions in a batch of four slots,
2026-11-24). Take `profiler` before `shared`, always in that order.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import torch


def lock_folder() -> Path:
    folder = Path(os.environ.get("KERNELDOJO_GPU_LOCKS") or Path(tempfile.gettempdir()) / "kerneldojo-gpu-locks")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextlib.contextmanager
def _flocked(path: Path, how: int) -> Iterator[None]:
    try:  # read-only is enough for flock: another user's file of mode 0644 still works
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as e:
        raise RuntimeError(f"judge: cannot open the GPU lock file {path} ({e.strerror}); every judge sharing this GPU "
                           "needs it: set KERNELDOJO_GPU_LOCKS to a folder they can all read") from None
    try:
        fcntl.flock(fd, how)
        yield
    finally:
        os.close(fd)  # releases the lock


TURNSTILES = {"lock": "turnstile", "long": "long-turnstile"}


class GPULock:
    """Many correctness checks at once (`shared`), or one timing alone (`exclusive`), among this process's
    threads and, with a `key` (the GPU's UUID), every process of this host that uses the same key."""

    def __init__(self, key: str | None = None):
        self._cond = threading.Condition()
        self._readers = 0
        self._long_readers = 0  # of `_readers`
        self._writer = False
        self._waiting_writers = 0
        self._gated = 0  # timings waiting for the long holds to end
        self._files = None if key is None else {kind: lock_folder() / f"{key}.{kind}"
                                                 for kind in ("lock", "long", *TURNSTILES.values(), "profiler")}
        self._profiler = threading.Lock()

    @contextlib.contextmanager
    def shared(self, long: bool = False):
        """A hold beside other checks; `long` for one of seconds (see the module's docstring)."""
        with self._cond:
            if long:  # behind any timing, waiting or not
                self._cond.wait_for(lambda: not self._writer and not self._waiting_writers and not self._gated)
            else:  # a waiting timing keeps new checks out, except while a long hold makes it wait anyway
                self._cond.wait_for(lambda: not self._writer and (not self._waiting_writers or self._long_readers))
            self._readers += 1
            self._long_readers += long
        try:
            with (self._queued("long", fcntl.LOCK_SH) if long else contextlib.nullcontext(),
                  self._queued("lock", fcntl.LOCK_SH)):
                yield
        finally:
            with self._cond:
                self._readers -= 1
                self._long_readers -= long
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self):
        # First the long holds end, this process's (no new one starts meanwhile) and then every process's (the
        # `long` file, queued), while short checks go on; only then does this timing keep new checks out. Whatever
        # raises on the way (a caller's timeout, a lock file that cannot be opened) leaves the counts as they were
        # (red team round 98: a leaked waiting count kept every later check of the process out).
        gated = waiting = False
        try:
            with self._cond:
                self._gated += 1
                gated = True
                self._cond.wait_for(lambda: not self._long_readers)
            with self._queued("long", fcntl.LOCK_EX):
                with self._cond:
                    self._gated -= 1
                    gated = False
                    self._waiting_writers += 1
                    waiting = True
                    self._cond.wait_for(lambda: not self._writer and not self._readers)
                    self._waiting_writers -= 1
                    waiting = False
                    self._writer = True
                try:
                    with self._queued("lock", fcntl.LOCK_EX):
                        yield
                finally:
                    with self._cond:
                        self._writer = False
                        self._cond.notify_all()
        finally:
            with self._cond:
                self._gated -= gated
                self._waiting_writers -= waiting
                self._cond.notify_all()

    @contextlib.contextmanager
    def profiler(self):
        """One Nsight Compute replay at a time on this GPU, among this host's judges."""
        with self._profiler, self._file("profiler", fcntl.LOCK_EX):
            yield

    @contextlib.contextmanager
    def _queued(self, kind: str, how: int) -> Iterator[None]:
        """`kind`'s file ("lock" or "long") taken `how` behind its turnstile, which a taker holds while it waits:
        later takers of any process queue behind a waiting timing (flock alone lets new shared holds pass a waiting
        exclusive one: red team round 98, another process's overlapping long holds starved a timing)."""
        with contextlib.ExitStack() as held:
            with self._file(TURNSTILES[kind], fcntl.LOCK_EX):
                held.enter_context(self._file(kind, how))
            yield

    def _file(self, kind: str, how: int) -> contextlib.AbstractContextManager:
        """The lock file of that kind, taken `how`; nothing for a lock of this process only."""
        return contextlib.nullcontext() if self._files is None else _flocked(self._files[kind], how)


_locks: dict[str, GPULock] = {}
_locks_lock = threading.Lock()


def gpu_lock(device: torch.device) -> GPULock:
    """The lock of `device` (one per device in this process); a CPU device's spans this process only."""
    name = str(device)
    with _locks_lock:
        if name not in _locks:
            key = None if device.type != "cuda" else "gpu-" + str(torch.cuda.get_device_properties(device).uuid)
            _locks[name] = GPULock(key)
        return _locks[name]
