"""Batch evaluation: many submissions over the GPU pool, results streamed to a JSONL store, and
the leaderboard built from that store.

Submissions come from a folder laid out `<dir>/<task>/<name>.{py,cu}` (like `baselines/`),
or from a JSONL manifest, one object per line:

    {"task": "softmax", "file": "runs/a.py", "language": "triton", "label": "policy-7/a"}
    {"task": "gelu", "source": "import triton ...", "label": "rollout-12"}

(`file` is relative to the manifest; `language` is detected when absent; `label` defaults to
the file's path, or `<manifest>:<line>`.)

The store holds one line per finished evaluation: the EvalResult's JSON with `label`, `hash`
(task, language and exact source) and `slot` added. Each line is written whole and synced
before the next, so a killed batch keeps every finished result; a half-written last line is
dropped on the next open, and a rerun skips the (label, hash) pairs already in the store.
Only one batch writes a store at a time (a lock on the file).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from kerneldojo.graders.compile import check_language, detect_language
from kerneldojo.result import EvalResult
from kerneldojo.tasks import TaskError, get_task, list_tasks

SOURCE_SUFFIXES = (".py", ".cu")


@dataclass(frozen=True)
class Submission:
    task: str
    source: str
    language: str
    label: str

    @property
    def hash(self) -> str:
        from kerneldojo.sandbox.pool import submission_hash

        return submission_hash(self.task, self.language, self.source)

    @property
    def key(self) -> tuple[str, str]:
        return self.label, self.hash


def submission(task: str, source: str, language: str | None, label: str) -> Submission:
    """Validated: a known task, a language it takes (detected when None)."""
    try:
        spec = get_task(task)
        language = language or detect_language(source)
        check_language(spec, language)
    except (TaskError, ValueError) as e:
        raise ValueError(f"{label}: {e}") from None
    return Submission(spec.id, source, language, label)


def load_submissions(path: Path | str) -> list[Submission]:
    """From a folder `<task>/<file>` or a JSONL manifest; raises ValueError naming the bad entry."""
    path = Path(path)
    if path.is_dir():
        return _from_folder(path)
    if path.is_file():
        return _from_manifest(path)
    raise FileNotFoundError(f"no such folder or manifest: {path}")


def _from_folder(root: Path) -> list[Submission]:
    tasks = set(list_tasks())
    found = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        files = sorted(f for f in folder.iterdir() if f.is_file() and f.suffix in SOURCE_SUFFIXES)
        if folder.name not in tasks:
            if files:
                print(f"kerneldojo: skipping {folder}: not a task name", file=sys.stderr)
            continue
        label_root = root.name if root.name else str(root)
        found += [submission(folder.name, f.read_text(), None, f"{label_root}/{folder.name}/{f.name}") for f in files]
    if not found:
        raise ValueError(f"{root}: no submissions found; expected {root}/<task>/<name>.py or .cu")
    return found


def _from_manifest(manifest: Path) -> list[Submission]:
    found = []
    for number, line in enumerate(manifest.read_text().splitlines(), 1):
        where = f"{manifest}:{number}"
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{where}: not a JSON object ({e.msg})") from None
        if not isinstance(entry, dict) or "task" not in entry or ("source" in entry) == ("file" in entry):
            raise ValueError(f"{where}: needs \"task\" and one of \"source\" or \"file\"")
        unknown = set(entry) - {"task", "source", "file", "language", "label"}
        if unknown:
            raise ValueError(f"{where}: unknown field {', '.join(sorted(unknown))}")
        if "file" in entry:
            file = manifest.parent / entry["file"]
            if not file.is_file():
                raise ValueError(f"{where}: no such file: {file}")
            source, label = file.read_text(), entry.get("label") or entry["file"]
        else:
            source, label = entry["source"], entry.get("label") or where
        found.append(submission(entry["task"], source, entry.get("language"), str(label)))
    if not found:
        raise ValueError(f"{manifest}: no submissions in the manifest")
    return found


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


def record_of(sub: Submission, result: EvalResult, slot: str | None) -> dict:
    return {"label": sub.label, "hash": sub.hash, "slot": slot, **result.model_dump(mode="json")}


@dataclass
class BatchSummary:
    submitted: int = 0
    skipped: int = 0  # already in the store
    evaluated: int = 0
    failed: int = 0  # the judge itself failed: nothing recorded, a rerun retries them


def run_batch(
    submissions: Iterable[Submission],
    store: ResultStore | Path | str,
    pool,
    progress: Callable[[str], None] | None = None,
) -> BatchSummary:
    """Evaluate what the store does not hold yet; append each result the moment it is known."""
    store = store if isinstance(store, ResultStore) else ResultStore(store)
    summary = BatchSummary()
    with store.writer() as append:
        done = store.finished()
        todo, seen = [], set()
        for sub in submissions:
            summary.submitted += 1
            if sub.key in done or sub.key in seen:
                summary.skipped += 1
                continue
            seen.add(sub.key)
            todo.append(sub)
        jobs = ((sub, (sub.task, sub.source, sub.language)) for sub in todo)
        for n, outcome in enumerate(pool.imap_unordered(jobs), 1):
            sub = outcome.tag
            where = f"[{n}/{len(todo)}] {outcome.slot or 'compile'} {sub.label}"
            if outcome.error is not None:
                summary.failed += 1
                if progress:
                    progress(f"{where}: judge error, not recorded: {type(outcome.error).__name__}: {outcome.error}")
                continue
            append(record_of(sub, outcome.result, outcome.slot))
            summary.evaluated += 1
            if progress:
                progress(f"{where}: {outcome.result.summary()}")
    return summary


# -- the leaderboard ------------------------------------------------------------------------


@dataclass
class Standing:
    task: str
    device: str
    submitted: int = 0
    correct: int = 0
    best: dict | None = None  # the record of the best correct result


def correct(record: dict) -> bool:
    """Counts for the leaderboard: correct on every check, and no anti-cheat check fired."""
    return record.get("status") == "ok" and not record.get("checks_fired")


def _rank(record: dict) -> tuple:
    speedup = record.get("speedup")
    timed = bool(record.get("timed")) and speedup is not None
    return (timed, speedup if timed else 0.0)


def standings(records: Iterable[dict]) -> list[Standing]:
    """Per task and device (the GPU's name, or "cpu"): the fastest correct result over eager PyTorch."""
    table: dict[tuple[str, str], Standing] = {}
    for record in records:
        try:
            EvalResult.model_validate(record)
        except ValidationError:
            continue
        key = (record["task"], record["device"])
        standing = table.setdefault(key, Standing(*key))
        standing.submitted += 1
        if correct(record):
            standing.correct += 1
            if standing.best is None or _rank(record) > _rank(standing.best):
                standing.best = record
    return [table[k] for k in sorted(table)]


def render_leaderboard(records: Iterable[dict]) -> str:
    rows_in = standings(records)
    if not rows_in:
        return "no results yet"

    def fmt(x, spec):
        return "-" if x is None else format(x, spec)

    rows = []
    for s in rows_in:
        b = s.best or {}
        timings = b.get("timings") or []
        roofline = b.get("roofline_fraction")
        rows.append((
            s.task, s.device, b.get("label") or "-", b.get("language") or "-",
            fmt(b.get("speedup"), ".2f"), fmt(b.get("speedup_vs_compile"), ".2f"),
            fmt(None if roofline is None else 100 * roofline, ".0f"),
            fmt(timings[-1]["submission"]["median_ms"] if timings else None, ".4g"),
            f"{s.correct}/{s.submitted}",
        ))  # fmt: skip
    from kerneldojo.cli import table

    header = ("task", "gpu", "best", "lang", "x eager", "x compile", "% roofline", "ms (largest bench)", "correct")
    text = table(header, rows)
    if not any(s.best and s.best.get("timed") for s in rows_in):
        text += "\nNothing was timed (CPU mode): 'best' is a correct submission, not ranked by speed."
    return text


def render_store(path: Path | str) -> str:
    store = ResultStore(path)
    if not store.path.is_file():
        raise FileNotFoundError(f"no such results file: {store.path}")
    text = render_leaderboard(store.records())
    if store.unreadable:
        text += f"\n({store.unreadable} unreadable line{'s' if store.unreadable != 1 else ''} skipped)"
    return text


# -- the command line (registered by kerneldojo.cli) ----------------------------------------


def add_commands(commands) -> dict[str, Callable]:
    batch = commands.add_parser("batch", help="evaluate many submissions over the GPUs into a JSONL store")
    batch.add_argument("submissions", type=Path, help="a folder <task>/<name>.{py,cu}, or a JSONL manifest")
    batch.add_argument("--devices", default="auto",
                       help="auto (default: every GPU, else CPU slots), all, cuda:0,cuda:2, 0,2, cpu, cpu:N")
    batch.add_argument("--out", type=Path, default=Path("results.jsonl"), help="the store; reruns resume it")
    batch.add_argument("--compile-workers", type=int, help="parallel nvcc builds (default: the CPU cores)")
    board = commands.add_parser("leaderboard", help="best correct result per task and GPU, from a store")
    board.add_argument("store", type=Path)
    return {"batch": cmd_batch, "leaderboard": cmd_leaderboard}


def cmd_batch(args) -> int:
    from kerneldojo.sandbox.pool import GPUPool, parse_devices

    parse_devices(args.devices)  # a bad device list fails before anything is read
    subs = load_submissions(args.submissions)
    with GPUPool(args.devices, compile_workers=args.compile_workers) as pool:
        print(f"kerneldojo: {len(subs)} submissions on {pool.describe()} -> {args.out}", file=sys.stderr)
        summary = run_batch(subs, args.out, pool, progress=lambda line: print(line, file=sys.stderr, flush=True))
    print(f"kerneldojo: {summary.evaluated} evaluated, {summary.skipped} already in {args.out}, "
          f"{summary.failed} judge errors", file=sys.stderr)  # fmt: skip
    print(render_store(args.out))
    return 1 if summary.failed else 0


def cmd_leaderboard(args) -> int:
    print(render_store(args.store))
    return 0
