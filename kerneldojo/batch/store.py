"""Result stores: where evaluations are kept, one record per finished evaluation.

    store = ResultStore(target)   # "results.jsonl": a JSONL file (any path not below)
                                  # "results.db" / ".sqlite" / ".sqlite3", "sqlite:///abs/path.db": SQLite (WAL)
                                  # "postgresql://user:pw@host:5432/db": PostgreSQL (psycopg 3)
    for record in store.records(): ...        # every record, oldest first
    store.finished()                          # {(label, hash)}: what a resumed batch skips
    with store.writer() as append:            # append(record): durable when it returns
        append(record)
    store.close()

A record is a dict: the `EvalResult` JSON (`kerneldojo.result`) plus
    label        what was submitted (a file path, a rollout id)   hash         `submission_hash(task, language, source)`
    slot         the device slot that ran it, or None             source       the submission's text, or None
    submitter    a person or agent, or None                       task_hash    `tasks.task_content_hash(task)`
    protocol     `version.PROTOCOL_VERSION` of the judge          recorded_at  ISO-8601 UTC time it was stored
`append` fills `task_hash`, `protocol` and `recorded_at` when absent (so callers pass `{label, hash, slot,
source?, submitter?, **result.model_dump(mode="json")}`), and raises ValueError on a dict that is not a result.
Records from older JSONL files lack the added keys; readers treat them as None.

The JSONL store syncs each line as written and takes a lock: one writer at a time; a torn last line (a killed
writer) is dropped on the next open. The database stores (`batch.db.SqlStore`) commit each record in its own
transaction, let several writers append at once, and migrate their schema to the newest (Alembic) on open.
`copy_records` imports one store into another; `export_records` writes JSONL, CSV or Parquet (with pyarrow).
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path

from pydantic import ValidationError

from kerneldojo.result import EvalResult
from kerneldojo.tasks import TaskError, task_content_hash
from kerneldojo.version import PROTOCOL_VERSION

DATABASE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
META_KEYS = ("label", "hash", "slot", "source", "submitter", "task_hash", "protocol", "recorded_at")


def submission_hash(task: str, language: str, source: str) -> str:
    """Identifies a submission: what it is for, in which language, and its exact text."""
    h = hashlib.sha256()
    for part in (task, language, source):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def is_database(target: Path | str) -> bool:
    """A database URL (`scheme://...`) or a path ending .db/.sqlite/.sqlite3; anything else is a JSONL file."""
    return "://" in str(target) or Path(target).suffix in DATABASE_SUFFIXES


def store_folders(target: Path | str) -> list[Path]:
    """The folder a store's records lie in: a JSONL file's, an SQLite database's (by path or `sqlite:///` URL);
    none for a database server."""
    text = str(target)
    if text.startswith("sqlite:"):
        from sqlalchemy.engine import make_url

        database = make_url(text).database
        return [Path(database).parent] if database and database != ":memory:" else []
    return [] if "://" in text else [Path(text).parent]


def stamped(record: dict) -> dict:
    """The record checked to be a result, with the task's version, the protocol and the time filled in."""
    try:
        EvalResult.model_validate({k: v for k, v in record.items() if k not in META_KEYS})
    except ValidationError as e:
        raise ValueError(f"not a result record ({e.error_count()} problems, first: {e.errors()[0]['msg']})") from None
    out = dict(record)
    if out.get("task_hash") is None:
        try:
            out["task_hash"] = task_content_hash(out["task"])
        except TaskError:  # a task this installation does not have: its version is unknown
            out["task_hash"] = None
    out.setdefault("protocol", PROTOCOL_VERSION)
    out.setdefault("recorded_at", datetime.now(timezone.utc).isoformat(timespec="seconds"))
    return out


class ResultStore:
    """The store `target` names (see the module's docstring); `ResultStore(target)` opens the right kind."""

    unreadable = 0  # records that could not be read (counted by records())

    kind = ""  # each kind of store names itself: "jsonl", "database" (`batch.db`, imported by `kerneldojo.batch`)

    def __new__(cls, target: Path | str):
        if cls is ResultStore:
            cls = {k.kind: k for k in ResultStore.__subclasses__()}["database" if is_database(target) else "jsonl"]
        return super().__new__(cls)

    def records(self) -> Iterator[dict]:
        raise NotImplementedError

    def finished(self) -> set[tuple[str, str]]:
        return {(r.get("label"), r.get("hash")) for r in self.records()}

    def writer(self) -> contextlib.AbstractContextManager[Callable[[dict], None]]:
        raise NotImplementedError

    def exists(self) -> bool:
        """Whether there is anything to read (a leaderboard of a mistyped path is an error, not an empty table)."""
        return True

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class JsonlStore(ResultStore):
    """The append-only JSONL store: one synced line per record, locked while written."""

    kind = "jsonl"

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.unreadable = 0

    def __str__(self) -> str:
        return str(self.path)

    def exists(self) -> bool:
        return self.path.is_file()

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
                data = (json.dumps(stamped(record), separators=(",", ":")) + "\n").encode()
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


# -- import and export ------------------------------------------------------------------------------------------


def copy_records(source: ResultStore, dest: ResultStore) -> tuple[int, int]:
    """Append every record of `source` that `dest` lacks (same label, hash, device and time stored; an undated
    record of an older JSONL file is stamped with the time of its import). Returns (copied, skipped)."""

    def key(r: dict, when: str | None) -> tuple:
        return r.get("label"), r.get("hash"), r.get("device"), when

    have = {k for r in dest.records() for k in (key(r, r.get("recorded_at")), key(r, "undated"))}
    copied = skipped = 0
    with dest.writer() as append:
        for record in source.records():
            k = key(record, record.get("recorded_at") or "undated")
            if k in have:
                skipped += 1
                continue
            append(record)
            have.add(k)
            copied += 1
    return copied, skipped


FLAT_COLUMNS = ("recorded_at", "task", "task_hash", "protocol", "device", "mode", "language", "status", "label",
                "submitter", "hash", "timed", "median_ms", "speedup", "speedup_vs_compile", "roofline_fraction",
                "checks_fired", "kerneldojo", "torch", "triton", "nvcc", "cuda_driver")  # fmt: skip


def flat_row(record: dict) -> dict:
    """The record's headline figures as flat columns (a spreadsheet's view; JSONL and Parquet keep everything)."""
    timings = record.get("timings") or []
    versions = record.get("versions") or {}
    row = {c: record.get(c) for c in FLAT_COLUMNS}
    row.update({k: versions.get(k) for k in ("kerneldojo", "torch", "triton", "nvcc", "cuda_driver")})
    row["median_ms"] = timings[-1]["submission"]["median_ms"] if timings else None
    row["checks_fired"] = ",".join(record.get("checks_fired") or [])
    return row


def _inert(value):
    """A spreadsheet cell that cannot be a formula: text starting with = + - @ (a submitter's label) is quoted."""
    return f"'{value}" if isinstance(value, str) and value[:1] in ("=", "+", "-", "@") else value


def export_records(records: Iterable[dict], out: Path | str) -> int:
    """Write records to `out` by its suffix: .jsonl (whole records), .csv (flat columns), .parquet (flat columns
    plus `source` and the whole record as JSON in `record`; needs pyarrow). Returns how many were written."""
    out = Path(out)
    if out.suffix not in (".jsonl", ".csv", ".parquet"):
        raise ValueError(f"{out}: export to a .jsonl, .csv or .parquet file")
    if out.suffix == ".parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise ValueError("Parquet export needs pyarrow, which is not installed: `pip install pyarrow`, "
                             "or export to .jsonl or .csv") from None  # fmt: skip
        rows = [{**flat_row(r), "source": r.get("source"), "record": json.dumps(r)} for r in records]
        pq.write_table(pa.Table.from_pylist(rows), out)
        return len(rows)
    n = 0
    with open(out, "w", newline="") as f:
        if out.suffix == ".csv":
            w = csv.DictWriter(f, fieldnames=FLAT_COLUMNS)
            w.writeheader()
            for n, r in enumerate(records, 1):  # noqa: B007
                w.writerow({k: _inert(v) for k, v in flat_row(r).items()})
        else:
            for n, r in enumerate(records, 1):  # noqa: B007
                f.write(json.dumps(r, separators=(",", ":")) + "\n")
    return n
