"""The leaderboard: the best correct result per task and GPU model, from a result store's records.

Like is compared with like: per task, only results of one task version (`task_hash`, the hash of the task's
folder) measured under one judge protocol (`protocol`) are ranked together, by default the newest version
(the one with the most recent result). Per GPU model it also gives KernelBench's summary figures (Ouyang et
al., 2025): fast_p, the share of tasks whose best result is correct and faster than eager PyTorch by more
than p, and the geometric-mean speedup. `render_leaderboard` is the CLI table; `batch.report` the HTML page.

A result answered from the judge's result cache (`reused`) is never ranked: a new best is judged again on fresh
seeds before it is stored (`Bests.rejudge`, used by `run_batch` and the service), and that record says
`rejudged`. Nor is a timed result whose speed no evidence pass checked (`audited`: a judge with the pass off, a step
the sampled pass did not draw, which a cheat could reroll until it got, or a pass that decided nothing: red team
rounds 39 and 40).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from kerneldojo.result import EvalResult, one_line, printable, speed_audited

from .store import ResultStore

NOT_RUN = ("compiled", "skipped")  # not failures: this machine could not run them (CPU mode, too few GPUs)
FAST_P = (1.0, 1.5, 2.0)


@dataclass
class Standing:
    task: str
    device: str
    submitted: int = 0
    correct: int = 0
    not_run: int = 0  # compiled but not run (no GPU), or skipped
    best: dict | None = None  # the record of the best correct result
    last_failure: dict | None = None  # the last record that was run and was not correct: why, when none is
    history: list[dict] = field(default_factory=list)  # each record that was the best when it arrived (timed)
    version: tuple[str | None, int | None] = (None, None)  # (task_hash, protocol)
    reused: int = 0  # correct results answered from the judge's cache, not re-judged: never ranked
    unaudited: int = 0  # correct timed results whose speed no evidence pass checked: never ranked


@dataclass
class DeviceSummary:
    device: str
    tasks: int  # tasks with at least one result that ran
    solved: int  # tasks with a correct result
    timed: int  # tasks whose best correct result was timed
    geomean_speedup: float | None  # over the timed best results
    fast_p: dict[float, float | None]  # None when nothing was timed


@dataclass
class Board:
    standings: list[Standing]
    summaries: list[DeviceSummary]
    other_versions: int = 0  # results of task versions or protocols not shown


def correct(record: dict) -> bool:
    """Counts for the leaderboard: correct on every check, and no anti-cheat check fired."""
    return record.get("status") == "ok" and not record.get("checks_fired")


def audited(record: dict) -> bool:
    """Its speed is the judge's word (`result.speed_audited`, the result cache's rule)."""
    return speed_audited(bool(record.get("timed")), record.get("evidence"))


def scored_ms(timing: dict) -> float:
    """The more conservative of the event median and the profiled busy time per call (as `CaseTiming`)."""
    return max(timing["submission"]["median_ms"], (timing.get("profile") or {}).get("busy_ms") or 0.0)


def time_ms(record: dict) -> float | None:
    """What the board ranks by: the geometric mean over bench cases of the scored median time."""
    timings = record.get("timings") or []
    if not record.get("timed") or not timings:
        return None
    return math.exp(sum(math.log(scored_ms(t)) for t in timings) / len(timings))


def confidence_ms(record: dict) -> tuple[float, float] | None:
    """The largest bench case's confidence interval of the median, where the result has one."""
    timings = record.get("timings") or []
    stats = timings[-1]["submission"] if timings else {}
    low, high = stats.get("ci_low_ms"), stats.get("ci_high_ms")
    return (low, high) if low is not None and high is not None else None


def _rank(record: dict) -> tuple:
    t = time_ms(record)  # ties (and untimed results) go to the larger speedup over eager
    return (t is not None, -t if t is not None else 0.0, record.get("speedup") or 0.0)


def version_of(record: dict) -> tuple[str | None, int | None]:
    return record.get("task_hash"), record.get("protocol")


class Bests:
    """The best correct, not reused result per task, GPU model, task version and protocol, as records arrive."""

    def __init__(self, records: Iterable[dict] = ()):
        self._best: dict[tuple, dict] = {}
        for record in records:
            self.add(record)

    @staticmethod
    def _key(record: dict) -> tuple:
        return record.get("task"), record.get("device"), *version_of(record)

    def add(self, record: dict) -> None:
        if correct(record) and audited(record) and not record.get("reused"):
            best = self._best.get(self._key(record))
            if best is None or _rank(record) > _rank(best):
                self._best[self._key(record)] = record

    def rejudge(self, record: dict) -> bool:
        """Is `record` reused from the judge's cache and would it be the new best (the first correct result counts)?
        Then it is judged again on fresh seeds, and that result stored instead."""
        best = self._best.get(self._key(record))
        return bool(record.get("reused")) and correct(record) and (best is None or _rank(record) > _rank(best))


def build_board(records: Iterable[dict], all_versions: bool = False) -> Board:
    """Standings per task and device (the GPU's name, or "cpu") for each task's newest version (every version
    with `all_versions`), and per device the summary figures."""
    valid = []
    for record in records:
        try:
            EvalResult.model_validate(record)
        except ValidationError:
            continue
        valid.append(record)
    valid.sort(key=lambda r: r.get("recorded_at") or "")  # stable: undated (old JSONL) records first, in order
    newest = {r["task"]: version_of(r) for r in valid}  # the last one wins
    table: dict[tuple, Standing] = {}
    other = 0
    for record in valid:
        version = version_of(record)
        if not all_versions and version != newest[record["task"]]:
            other += 1
            continue
        key = (record["task"], record["device"], *((version,) if all_versions else ()))
        standing = table.setdefault(key, Standing(record["task"], record["device"], version=version))
        standing.submitted += 1
        if record.get("status") in NOT_RUN:
            standing.not_run += 1
        elif correct(record) and record.get("reused"):
            standing.reused += 1
        elif correct(record) and not audited(record):
            standing.unaudited += 1
        elif correct(record):
            standing.correct += 1
            if standing.best is None or _rank(record) > _rank(standing.best):
                standing.best = record
                if time_ms(record) is not None:
                    standing.history.append(record)
        else:
            standing.last_failure = record
    standings = [table[k] for k in sorted(table, key=lambda k: tuple(map(str, k)))]
    return Board(standings, summarize(standings), other)


def summarize(standings: list[Standing]) -> list[DeviceSummary]:
    summaries = []
    for device in sorted({s.device for s in standings}):
        ran = [s for s in standings if s.device == device and s.submitted > s.not_run]
        speedups = [s.best["speedup"] for s in ran if s.best and s.best.get("timed") and s.best.get("speedup")]
        fast = {p: (sum(x > p for x in speedups) / len(ran) if speedups else None) for p in FAST_P}
        geomean = math.exp(sum(map(math.log, speedups)) / len(speedups)) if speedups else None
        summaries.append(DeviceSummary(device, len(ran), sum(s.best is not None for s in ran), len(speedups),
                                       geomean, fast))  # fmt: skip
    return summaries


def standings(records: Iterable[dict], all_versions: bool = False) -> list[Standing]:
    """Per task and device: the fastest correct result (see `build_board`)."""
    return build_board(records, all_versions).standings


def fmt(x, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def who(record: dict) -> str:
    """The label, and who sent it (a batch's submitter, a service token's name): a label is free text, so a row
    labelled `alice/softmax` by another token says whose it is (red team round 23)."""
    label = record.get("label") or "-"
    sender = record.get("submitter") or record.get("owner")
    return f"{label} ({sender})" if sender else label


def shown_ms(record: dict) -> str:
    timings = record.get("timings") or []
    if not record.get("timed") or not timings:
        return "-"
    ci = confidence_ms(record)
    return f"{scored_ms(timings[-1]):.4g}" + (f" [{ci[0]:.4g}, {ci[1]:.4g}]" if ci else "")


def render_leaderboard(records: Iterable[dict], all_versions: bool = False) -> str:
    board = build_board(records, all_versions)
    if not board.standings:
        return "no results yet"
    rows = []
    for s in board.standings:
        b = s.best or {}
        roofline = b.get("roofline_fraction")
        task = f"{s.task}@{(s.version[0] or 'unknown')[:8]}/p{s.version[1]}" if all_versions else s.task
        rows.append((
            task, s.device, who(b) if b else "-", b.get("language") or "-",
            fmt(b.get("speedup"), ".2f"), fmt(b.get("speedup_vs_compile"), ".2f"),
            fmt(None if roofline is None else 100 * roofline, ".0f"), shown_ms(b) if b else "-",
            (b.get("recorded_at") or "-")[:16].replace("T", " "),
            f"{s.correct}/{s.submitted - s.not_run}", str(s.not_run),
        ))  # fmt: skip
    header = ("task", "gpu", "best", "lang", "x eager", "x compile", "% roofline", "ms (largest bench)", "when",
              "correct", "not run")  # fmt: skip
    text = table(header, rows)
    for d in board.summaries:
        line = f"\n{d.device}: {d.solved}/{d.tasks} tasks solved"
        if d.timed:
            fast = ", ".join(f"fast_{p:.1f} {d.fast_p[p]:.2f}" for p in FAST_P)
            line += f"; geomean speedup {d.geomean_speedup:.2f}x eager over {d.timed} timed; {fast}"
        text += line
    if not any(s.best and s.best.get("timed") for s in board.standings):
        text += "\nNothing was timed (CPU mode): 'best' is a correct submission, not ranked by speed."
    for s in board.standings:  # a row with no correct result says why
        if s.best is not None:
            continue
        if s.last_failure is None:
            text += f"\n{s.task} on {s.device}: compiled, not run (no GPU here): {s.not_run} result(s)"
            continue
        failure = s.last_failure
        why = printable(str(next(iter(failure.get("messages") or []), ""))).strip().splitlines()
        text += f"\n{s.task} on {s.device}: no correct result; last: {failure.get('status')}" + (
            f" ({why[0][:100]})" if why else "")
    reused = sum(s.reused for s in board.standings)
    if reused:
        text += f"\n({reused} correct result(s) reused from the judge's cache, not re-judged: not ranked)"
    if unaudited := sum(s.unaudited for s in board.standings):
        text += f"\n({unaudited} correct timed result(s) whose speed no evidence pass checked: not ranked)"
    if board.other_versions:
        text += (f"\n({board.other_versions} result(s) of older task versions or judge protocols not compared; "
                 "--all-versions shows them)")  # fmt: skip
    return text


def open_existing(target: Path | str) -> ResultStore:
    store = ResultStore(target)
    if not store.exists():
        raise FileNotFoundError(f"no such results file: {target}")
    return store


def render_store(target: Path | str, all_versions: bool = False) -> str:
    with open_existing(target) as store:
        text = render_leaderboard(store.records(), all_versions)
        if store.unreadable:
            text += f"\n({store.unreadable} unreadable line{'s' if store.unreadable != 1 else ''} skipped)"
    return text


def table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    rows = [tuple(one_line(str(c)) for c in r) for r in rows]  # a stored label or message is a submitter's text
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([line.format(*header), line.format(*("-" * w for w in widths)), *(line.format(*r) for r in rows)])
