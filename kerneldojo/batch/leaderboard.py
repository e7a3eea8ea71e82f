"""The leaderboard: the best correct result per task and GPU, from a result store's records, as a table."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from kerneldojo.result import EvalResult

from .store import ResultStore


@dataclass
class Standing:
    task: str
    device: str
    submitted: int = 0
    correct: int = 0
    best: dict | None = None  # the record of the best correct result
    last_failure: dict | None = None  # the last record that was not correct: why, when none is


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
        else:
            standing.last_failure = record
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
    header = ("task", "gpu", "best", "lang", "x eager", "x compile", "% roofline", "ms (largest bench)", "correct")
    text = table(header, rows)
    if not any(s.best and s.best.get("timed") for s in rows_in):
        text += "\nNothing was timed (CPU mode): 'best' is a correct submission, not ranked by speed."
    unexplained = [s for s in rows_in if s.best is None and s.last_failure]
    for s in unexplained:  # a row with no correct result says why
        failure = s.last_failure
        why = next(iter(failure.get("messages") or []), "").strip().splitlines()
        text += f"\n{s.task} on {s.device}: no correct result; last: {failure.get('status')}" + (
            f" ({why[0][:100]})" if why else "")
    return text


def render_store(path: Path | str) -> str:
    store = ResultStore(path)
    if not store.path.is_file():
        raise FileNotFoundError(f"no such results file: {store.path}")
    text = render_leaderboard(store.records())
    if store.unreadable:
        text += f"\n({store.unreadable} unreadable line{'s' if store.unreadable != 1 else ''} skipped)"
    return text


def table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([line.format(*header), line.format(*("-" * w for w in widths)), *(line.format(*r) for r in rows)])
