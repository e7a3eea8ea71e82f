"""The append-only JSONL result store of a batch: one synced line per finished evaluation, locked
while a batch writes it, a torn last line dropped on the next open."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path


def submission_hash(task: str, language: str, source: str) -> str:
    """Identifies a submission: what it is for, in which language, and its exact text."""
    h = hashlib.sha256()
    for part in (task, language, source):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


class ResultStore:
    """The append-only JSONL store of a batch."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.unreadable = 0  # lines that are not a record (counted by records())

    def records(self) -> Iterator[dict]:
        """Every complete, well-formed line; a torn last line (a killed writer) is skipped."""
        self.unreadable = 0
        if not self.path.exists():
            return
        with open(self.path, "rb") as f:
            for raw in f:
                if not raw.endswith(b"\n"):
                    continue  # the write was cut short
                try:
                    record = json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    self.unreadable += 1
                    continue
                if isinstance(record, dict) and "task" in record and "status" in record:
                    yield record
                else:
                    self.unreadable += 1

    def finished(self) -> set[tuple[str, str]]:
        return {(r.get("label"), r.get("hash")) for r in self.records()}

    @contextlib.contextmanager
    def writer(self) -> Iterator[Callable[[dict], None]]:
        """Locks the store, drops a torn last line, and yields `append(record)`."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ValueError(f"{self.path}: another batch is writing this store") from None
            _drop_torn_tail(fd)

            def append(record: dict) -> None:
                data = (json.dumps(record, separators=(",", ":")) + "\n").encode()
                written = 0
                while written < len(data):
                    written += os.write(fd, data[written:])
                os.fsync(fd)

            yield append
        finally:
            os.close(fd)  # releases the lock


def _drop_torn_tail(fd: int) -> None:
    size = os.fstat(fd).st_size
    if size == 0:
        return
    os.lseek(fd, max(0, size - 1), os.SEEK_SET)
    if os.read(fd, 1) == b"\n":
        return
    # Find the end of the last complete line, reading backwards.
    end, pos, chunk = 0, size, 1 << 16
    while pos > 0:
        start = max(0, pos - chunk)
        os.lseek(fd, start, os.SEEK_SET)
        block = os.read(fd, pos - start)
        newline = block.rfind(b"\n")
        if newline >= 0:
            end = start + newline + 1
            break
        pos = start
    os.ftruncate(fd, end)
