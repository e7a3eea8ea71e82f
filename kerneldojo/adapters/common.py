"""What both adapters share: the adapted problem, its task folder, evaluation and the suites' metrics."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kerneldojo.graders.compile import source_problem
from kerneldojo.result import EvalResult
from kerneldojo.tasks import Task, load_task

# KernelBench's fast_p thresholds as its papers report them (fast_0 is the share correct).
FAST_P = (0.0, 1.0, 2.0)


@dataclass
class Problem:
    """One problem of a suite: the task it became (None, with `reason`, when it cannot run), what every
    result on it should say (`notes`, e.g. reduced sizes), and how a solution's text becomes a submission."""

    suite: str
    name: str
    path: Path
    task: Task | None = None
    reason: str | None = None
    notes: list[str] = field(default_factory=list)
    degenerate: list[str] = field(default_factory=list)
    wrap: Callable[[str], str] = lambda source: source

    def evaluate(self, source: str, judge) -> EvalResult:
        """The judge's verdict on a solution in the suite's own form, with this problem's notes."""
        if self.task is None:  # a problem that cannot run: scored as the judge scores a skip (a failure's reward)
            from kerneldojo.judge import versions

            return EvalResult(task=self.name, language="python", status="skipped", device=judge.device.name,
                              mode=judge.device.mode, versions=versions(), messages=[self.reason or "unsupported"],
                              reward=judge.reward("skipped", None))
        if source_problem(source):  # refused by the judge as it is, before any parse or wrap of it (red team 59)
            return judge.evaluate(self.task, source, "python")
        result = judge.evaluate(self.task, self.wrap(source), "python")
        result.messages += [n for n in self.notes if judge.device.mode == "cpu" or "CPU mode" not in n]
        result.messages += [f"degenerate problem: {d}" for d in self.degenerate]
        if result.kernel_coverage is not None:
            result.messages.append(f"{result.kernel_coverage:.0%} of GPU time in the solution's own kernels")
        return result


@dataclass
class SuiteResult:
    """A batch over a suite's folder: every problem's result, and the suite's own metrics beside ours."""

    results: dict[str, EvalResult]

    def metrics(self) -> dict[str, float | int | None]:
        rs = list(self.results.values())
        timed = [r.speedup for r in rs if r.status == "ok" and r.speedup]
        out: dict = {"problems": len(rs), "correct": sum(r.status in ("ok", "compiled") for r in rs),
                     "skipped": sum(r.status == "skipped" for r in rs),
                     "flagged": sum(r.status == "flagged" for r in rs)}
        out |= {f"fast_{p:g}": fast_p(rs, p) for p in FAST_P}
        out["geomean_speedup"] = math.exp(sum(map(math.log, timed)) / len(timed)) if timed else None
        return out

    def render(self) -> str:
        from kerneldojo.batch.leaderboard import table

        rows = [(name, r.status, f"{r.speedup:.2f}x" if r.speedup else "-", (r.messages or [""])[0][:70])
                for name, r in sorted(self.results.items())]
        metrics = "  ".join(f"{k}={'-' if v is None else round(v, 3)}" for k, v in self.metrics().items())
        return f"{table(('problem', 'status', 'speedup', 'message'), rows)}\n{metrics}"


def fast_p(results: list[EvalResult], p: float) -> float | None:
    """KernelBench's fast_p: the share of problems whose solution is correct and more than p times as fast
    as the reference (p=0: correct). None above 0 where nothing was timed (CPU mode)."""
    if not results or (p > 0 and not any(r.timed for r in results)):
        return None
    fast = [r for r in results if r.status == "ok" and (p == 0 or (r.speedup or 0) > p)]
    return len(fast) / len(results)


def task_id(prefix: str, name: str) -> str:
    clean = "".join(c if c.isalnum() else "_" for c in name.lower()).strip("_")
    return f"{prefix}_{clean}"[:60]


def write_task(spec: dict, files: dict[str, str]) -> Task:
    """A task folder under the cache (KERNELDOJO_CACHE, else ~/.cache/kerneldojo), named by its content."""
    text = _toml(spec)
    digest = hashlib.sha256((text + json.dumps(files, sort_keys=True)).encode()).hexdigest()[:16]
    root = Path(os.environ.get("KERNELDOJO_CACHE") or Path.home() / ".cache" / "kerneldojo") / "adapters" / digest
    folder = root / spec["id"]
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in {"task.toml": text, **files}.items():
        (folder / name).write_text(content)
    return load_task(folder)


def _toml(spec: dict) -> str:
    """The few TOML forms a generated task.toml needs: scalars, lists, tables of tables, inline tables."""
    def key(k: str) -> str:  # a bare key where TOML allows one, else quoted (`"input_shape[0]"`)
        return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)

    def value(v) -> str:
        if isinstance(v, dict):
            return "{" + ", ".join(f"{key(k)} = {value(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return json.dumps(v)  # strings, ints, floats, booleans: TOML spells them as JSON does

    lines, tables = [], []
    for k, v in spec.items():
        if isinstance(v, dict) and all(isinstance(x, dict) for x in v.values()) and v:
            tables.append((k, v))
        else:
            lines.append(f"{k} = {value(v)}")
    for name, table in tables:
        for sub, entries in table.items():
            lines.append(f"\n[{name}.{sub}]")
            lines += [f"{key(k)} = {value(x)}" for k, x in entries.items()]
    return "\n".join(lines) + "\n"
