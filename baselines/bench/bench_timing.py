"""How far the judge's timings can be trusted (issue 4, item 7). Three measurements on one GPU:

1. repeat: the same shipped baseline evaluated in separate judge steps (`Judge.evaluate`), and the
   spread of each benchmark case's median across steps (goal: under 2 % for kernels of 20 µs or more);
2. ncu: the judge's event median beside Nsight Compute's `gpu__time_duration.sum` for the same
   kernel at the same size (goal: within 3 %), ncu run with `--clock-control none` (clocks are
   never locked or changed) and `--cache-control all` (caches flushed before each kernel, as the
   judge flushes L2);
3. range: the Triton `vector_add` kernel from about 5 µs to 50 ms, timed by `graders.timing.time_calls`
   over a pool of input sets refilled on reuse, with runs, median, IQR and relative standard error,
   the profiler's busy time beside it, and the share of the measured copy roofline;
4. method: the ncu section's kernels timed in this process by `time_calls` with the judge's method
   and with the variants it replaced (L2 flushed by a write instead of a read; a fixed GPU spin
   instead of the host gate), on an idle host and on one with every core busy, side by side.

    python baselines/bench/bench_timing.py --out DIR [--budget-s 420] [--steps 10]
    python baselines/bench/bench_timing.py --render DIR/timing.json   # tables from a saved run

DIR/timing.json is rewritten after every step, so a run cut short keeps what it measured; each
section runs inside its own try/except. The tables are printed as markdown and saved as DIR/timing.md.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import glob
import importlib.util
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

SECTIONS = ("range", "repeat", "method", "ncu")
# (task, languages to try in order). The Triton matmul baseline autotunes at every step (~7 s a
# step on an H100, docs/results.md), so the CUDA one is tried first; Triton only if nvcc fails.
REPEAT_TASKS = (("vector_add", ("triton",)), ("matmul", ("cuda", "triton")), ("softmax", ("triton",)))
# task -> the function-name pattern of the one kernel each call of its baseline launches.
NCU_KERNELS = {"vector_add": "add_kernel", "matmul": "gemm_bf16", "softmax": "softmax_(fused|online)"}
NCU_METRIC = "gpu__time_duration.sum"
TARGETS_MS = (0.005, 0.05, 0.5, 5.0, 50.0)
BIG_N = 1 << 27  # vector_add elements past which the range section makes passes instead (1.5 GiB a set)
POOL_BYTES_CAP = 8 << 30
GOAL_SPREAD, GOAL_NCU, MIN_REPEAT_MS = 0.02, 0.03, 0.020
RANGE_BUDGET_S, NCU_RESERVE_S, NCU_MIN_S, NCU_TASK_LIMIT_S = 90.0, 130.0, 40.0, 200.0
METHOD_RESERVE_S = 60.0
UNIT_MS = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0,
           "second": 1e3, "s": 1e3}


# ---------------------------------------------------------------------------------------------
# The report: one JSON document, rewritten after each step.


class Report:
    def __init__(self, out: Path, meta: dict):
        self.path = out / "timing.json"
        self.data: dict = {"meta": meta}
        self.started = time.perf_counter()
        self.save()

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, default=str))
        tmp.replace(self.path)


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}\n" + "".join(traceback.format_exc(limit=6))[-2500:]


# ---------------------------------------------------------------------------------------------
# Statistics.


def spread(values: list[float]) -> dict:
    """Spread of per-step medians: (max - min) / median, and stdev / mean."""
    if not values:
        return {"n": 0}
    med = statistics.median(values)
    out = {"n": len(values), "median": med, "min": min(values), "max": max(values),
           "range_rel": (max(values) - min(values)) / med if med > 0 else None}
    out["cv"] = statistics.stdev(values) / statistics.fmean(values) if len(values) > 1 else None
    return out


def rse(times: list[float]) -> float | None:
    if len(times) < 2:
        return None
    return statistics.stdev(times) / (math.sqrt(len(times)) * statistics.fmean(times))


@contextlib.contextmanager
def captured_times():
    """The raw per-call times `time_calls` summarizes (it returns only the summary), for the RSE."""
    from kerneldojo.graders import timing

    kept: list[list[float]] = []
    original = timing.summarize

    def keep(times):
        kept.append(list(times))
        return original(times)

    timing.summarize = keep
    try:
        yield kept
    finally:
        timing.summarize = original


# ---------------------------------------------------------------------------------------------
# Section "range": one copy-like kernel from ~5 µs to ~50 ms.


def range_size(target_ms: float, copy_bytes_per_s: float, block: int, big_n: int = BIG_N) -> tuple[int, int]:
    """(n, passes) so that vector_add moves ~target_ms of the measured copy bandwidth: 12 bytes an
    element; past big_n elements the kernel sweeps the same arrays `passes` times in one launch."""
    elements = target_ms * 1e-3 * copy_bytes_per_s / 12
    n = max(block, round(elements / block) * block)
    if n <= big_n:
        return n, 1
    return big_n, max(1, round(elements / big_n))


def pool_sets(set_bytes: int, l2_bytes: int, lo: int = 2, hi: int = 64) -> int:
    return max(lo, min(hi, math.ceil(2 * l2_bytes / max(set_bytes, 1)), POOL_BYTES_CAP // max(set_bytes, 1)))


def load_baseline(task_id: str, language: str = "triton"):
    from kerneldojo.baselines import shipped_solutions

    path = shipped_solutions(task_id)[language]
    spec = importlib.util.spec_from_file_location(f"kerneldojo_bench_timing_{task_id}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def time_range_row(kernel, block: int, warps: int, n: int, passes: int, device, l2_bytes: int,
                   copy_bytes_per_s: float, budget_s: float = 2.0) -> dict:
    """Time `kernel` over a (tiles, passes) grid; every pass recomputes out = x + y over all n.
    Programs are scheduled in order of their linear id, so the passes run one after another and
    each streams the arrays from DRAM (they are far larger than L2 when passes > 1)."""
    import torch

    from kerneldojo.graders.profile import OwnKernels, profile_calls, summarize_profile
    from kerneldojo.graders.timing import time_calls

    tiles = -(-n // block)
    sets_n = pool_sets(12 * n, l2_bytes)
    gen = torch.Generator(device=device).manual_seed(0)
    xs = [torch.randn(n, generator=gen, device=device) for _ in range(sets_n)]
    ys = [torch.randn(n, generator=gen, device=device) for _ in range(sets_n)]
    outs = [torch.empty(n, device=device) for _ in range(sets_n)]
    called: set[int] = set()

    def call(k: int) -> None:
        kernel[(tiles, passes)](xs[k], ys[k], outs[k], n, BLOCK=block, num_warps=warps)
        called.add(k)

    def refill(k: int) -> None:  # new content, same memory, as the judge's harness does
        xs[k].normal_(generator=gen)
        ys[k].normal_(generator=gen)
        outs[k].fill_(float("nan"))

    def prepare(i: int) -> None:
        if i >= sets_n:
            refill(i % sets_n)

    calls = [lambda k=k: call(k) for k in range(sets_n)]
    with captured_times() as kept:
        stats = time_calls(calls, device, l2_bytes, budget_s=budget_s, prepare=prepare)
    times = kept[-1]
    correct = all(torch.equal(outs[k], xs[k] + ys[k]) for k in sorted(called))
    profiled = min(10, sets_n)
    for k in range(profiled):
        refill(k)
    profile = summarize_profile(profile_calls(calls[:profiled], device, l2_bytes), profiled,
                                OwnKernels(triton={"add_kernel"}))
    moved = 12 * n * passes
    floor = 1e3 * moved / copy_bytes_per_s
    scored = max(stats.median_ms, profile.busy_ms)
    for pool in (xs, ys, outs):
        pool.clear()
    torch.cuda.empty_cache()
    return {
        "n": n, "passes": passes, "bytes": moved, "sets": sets_n, "runs": stats.runs,
        "median_ms": stats.median_ms, "mean_ms": stats.mean_ms, "iqr_ms": stats.iqr_ms, "min_ms": stats.min_ms,
        "max_ms": stats.max_ms, "rse": rse(times), "busy_ms": profile.busy_ms, "kernel_ms": profile.kernel_ms,
        "launches_per_call": profile.launches_per_call, "own_share": profile.own_share, "floor_ms": floor,
        "scored_ms": scored, "roofline_event": floor / stats.median_ms, "roofline_busy": floor / profile.busy_ms
        if profile.busy_ms > 0 else None, "roofline_scored": floor / scored, "correct": correct,
    }  # fmt: skip


def section_range(report: Report, device, l2_bytes: int, copy_bytes_per_s: float, stop_at: float) -> None:
    module = load_baseline("vector_add")
    rows = report.data["range"]["rows"]
    for target in TARGETS_MS:
        if time.perf_counter() > stop_at:
            report.data["range"]["note"] = f"time budget spent before the {target} ms row"
            break
        n, passes = range_size(target, copy_bytes_per_s, module.BLOCK)
        row = {"target_ms": target}
        try:
            row |= time_range_row(module.add_kernel, module.BLOCK, module.NUM_WARPS, n, passes, device, l2_bytes,
                                  copy_bytes_per_s)
        except Exception as e:
            row["error"] = _error(e)
        rows.append(row)
        report.save()
        print(f"range {target} ms: {json.dumps({k: v for k, v in row.items() if k != 'error'})}",
              row.get("error", ""), file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Section "repeat": the same submission in separate judge steps.


GPU_QUERY = "clocks.sm,clocks.mem,temperature.gpu,power.draw,clocks_event_reasons.active"


def gpu_state(index: int) -> str:
    """nvidia-smi's read-only view of the GPU's clocks, temperature, power and throttle reasons."""
    try:
        proc = subprocess.run(["nvidia-smi", f"--query-gpu={GPU_QUERY}", "--format=csv,noheader", "-i", str(index)],
                              capture_output=True, text=True, timeout=20)
        return (proc.stdout or proc.stderr).strip()
    except (OSError, subprocess.SubprocessError) as e:
        return f"{type(e).__name__}: {e}"


def step_record(result) -> dict:
    cases = []
    for t in result.timings:
        p = t.profile
        cases.append({"case": t.case, "median_ms": t.submission.median_ms, "mean_ms": t.submission.mean_ms,
                      "iqr_ms": t.submission.iqr_ms, "runs": t.submission.runs, "min_ms": t.submission.min_ms,
                      "max_ms": t.submission.max_ms, "busy_ms": p.busy_ms if p else None,
                      "kernel_ms": p.kernel_ms if p else None, "scored_ms": t.scored_ms, "floor_ms": t.floor_ms})
    return {"status": result.status, "wall_s": result.wall_s, "messages": [m[:300] for m in result.messages[:3]],
            "cases": cases}


def summarize_steps(steps: list[dict]) -> list[dict]:
    by_case: dict[str, dict[str, list[float]]] = {}
    for step in steps:
        if step.get("status") != "ok":
            continue
        for c in step["cases"]:
            d = by_case.setdefault(c["case"], {"median": [], "busy": [], "scored": []})
            d["median"].append(c["median_ms"])
            if c.get("busy_ms") is not None:
                d["busy"].append(c["busy_ms"])
            d["scored"].append(c["scored_ms"])
    out = []
    for case, d in by_case.items():
        s = spread(d["median"])
        in_scope = s["median"] >= MIN_REPEAT_MS
        out.append({"case": case, "event": s, "busy": spread(d["busy"]), "scored": spread(d["scored"]),
                    "per_step_ms": d["median"],
                    "in_scope": in_scope, "goal_met": (s["range_rel"] is not None and s["range_rel"] < GOAL_SPREAD)
                    if in_scope and s["n"] > 1 else None})
    return out


def section_repeat(report: Report, steps: int, isolation: str, out: Path, stop_at: float) -> None:
    """Round-robin over the tasks (step 1 of each, then step 2 of each, ...): other kernels run
    between two steps of one task, as in training, and a budget cut leaves every task as many steps."""
    from kerneldojo.baselines import shipped_solutions
    from kerneldojo.judge import Judge

    judge = Judge("cuda", time_compiled_reference=False, isolation=isolation,
                  reference_cache=out / "reference_times.json")
    index = judge.device.torch_device.index or 0

    def step(task_id: str, source: str, language: str):
        before, started = gpu_state(index), time.perf_counter()
        result = judge.evaluate(task_id, source, language)
        return result, {"at_s": round(started - report.started, 1), "gpu_before": before, "gpu_after": gpu_state(index)}

    entries, sources = [], {}
    for task_id, languages in REPEAT_TASKS:  # step 1, and the language: the first whose baseline passes
        entry = {"task": task_id, "language": None, "steps": [], "tried": []}
        entries.append(entry)
        report.data["repeat"]["tasks"].append(entry)
        try:
            solutions = shipped_solutions(task_id)
            for language in [lang for lang in languages if lang in solutions]:
                first, seen = step(task_id, solutions[language].read_text(), language)
                entry["tried"].append({"language": language, "status": first.status, "wall_s": first.wall_s})
                if first.status == "ok":
                    entry["language"], sources[task_id] = language, solutions[language].read_text()
                    entry["steps"].append(step_record(first) | seen)
                    entry["summary"] = summarize_steps(entry["steps"])
                    break
                entry["tried"][-1]["messages"] = [m[:500] for m in first.messages[:3]]
        except Exception as e:
            entry["error"] = _error(e)
        report.save()
    for _ in range(1, steps):
        for entry in entries:
            if not entry["language"] or entry.get("error") or len(entry["steps"]) >= steps:
                continue
            if time.perf_counter() > stop_at:
                entry["note"] = f"time budget spent after {len(entry['steps'])} steps"
                continue
            try:
                result, seen = step(entry["task"], sources[entry["task"]], entry["language"])
                entry["steps"].append(step_record(result) | seen)
            except Exception as e:
                entry["error"] = _error(e)
            entry["summary"] = summarize_steps(entry["steps"])
            report.save()
            last = entry["steps"][-1]
            print(f"repeat {entry['task']} step {len(entry['steps'])}: {last['status']}, {last['wall_s']:.1f} s, "
                  + ", ".join(f"{c['median_ms'] * 1e3:.2f} µs" for c in last["cases"]), file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Section "method": the judge's timing method beside the variants it replaced, in one process.


class _WriteFlush:
    """The L2 flush the judge replaced: a write (`zero_()`) of twice the L2, which leaves dirty lines."""

    def __init__(self, device, l2_bytes: int):
        import torch

        self.buffer = torch.empty(max(2 * l2_bytes, 1 << 20), dtype=torch.uint8, device=device)

    def __call__(self) -> None:
        self.buffer.zero_()


class _Spin:
    """The head start the host gate replaced: a fixed ~0.1 ms GPU spin before the start event."""

    def __init__(self, device):
        pass

    def close(self) -> None:
        import torch

        torch.cuda._sleep(200_000)

    def open(self) -> None:
        pass


# name -> (flush, head start, host loaded); the first is the judge's method.
METHOD_VARIANTS = {"judge": ("read", "gate", False), "write flush": ("write", "gate", False),
                   "spin (old)": ("write", "spin", False), "judge, host loaded": ("read", "gate", True),
                   "spin (old), host loaded": ("write", "spin", True)}
METHOD_TASKS = ("vector_add", "softmax")
HEAD_STARTS = {"gate": "the host gate", "spin": "a 0.1 ms spin"}


@contextlib.contextmanager
def timing_method(flush: str, head_start: str):
    from kerneldojo.graders import timing

    saved = timing.L2Flush, timing.HostGate
    timing.L2Flush = _WriteFlush if flush == "write" else saved[0]
    timing.HostGate = _Spin if head_start == "spin" else saved[1]
    try:
        yield
    finally:
        timing.L2Flush, timing.HostGate = saved


@contextlib.contextmanager
def busy_host():
    """Every core spinning in a process of its own, as when other workers start beside a step."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    try:
        time.sleep(0.5)
        yield
    finally:
        for p in spinners:
            p.kill()
        for p in spinners:
            p.wait()


def section_method(report: Report, device, l2_bytes: int, stop_at: float, budget_s: float = 1.0) -> None:
    import torch

    from kerneldojo.graders.timing import pool_size, time_calls
    from kerneldojo.tasks import get_task

    for task_id in METHOD_TASKS:
        task = get_task(task_id)
        solution = load_baseline(task_id).solution
        for case in task.cases("bench"):
            if time.perf_counter() > stop_at:
                report.data["method"]["note"] = f"time budget spent before {task_id} {case}"
                return
            row = {"task": task_id, "case": str(case), "variants": {}}
            report.data["method"]["tasks"].append(row)
            try:
                probe = task.reference.make_inputs(case.shape, 0, device)
                set_bytes = sum(t.numel() * t.element_size() for t in probe + task.expected(*probe, shape=case.shape))
                del probe
                calls = task.reference_calls(case.shape, device, pool_size(set_bytes, l2_bytes), fn=solution)
                for name, (flush, head_start, loaded) in METHOD_VARIANTS.items():
                    with timing_method(flush, head_start), busy_host() if loaded else contextlib.nullcontext():
                        stats = time_calls(calls, device, l2_bytes, budget_s=budget_s)
                    row["variants"][name] = {"median_ms": stats.median_ms, "iqr_ms": stats.iqr_ms, "runs": stats.runs}
                del calls
                torch.cuda.empty_cache()
            except Exception as e:
                row["error"] = _error(e)
            report.save()
            print(f"method {task_id} {case}: " + ", ".join(f"{k} {v['median_ms'] * 1e3:.2f} µs"
                                                            for k, v in row["variants"].items()),
                  row.get("error", ""), file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Section "ncu": Nsight Compute's kernel duration for the same kernels and sizes.

DRIVER = r'''"""Written by baselines/bench/bench_timing.py: launch one shipped baseline for Nsight Compute.
Argument: a JSON spec. Each case: `warmup` calls, then `launches` calls; one kernel per call."""
import json
import sys

import torch

from kerneldojo.baselines import shipped_solutions
from kerneldojo.graders.compile import compile_submission
from kerneldojo.graders.correctness import poisoned_like
from kerneldojo.sandbox.device import resolve_device, synchronize
from kerneldojo.sandbox.worker.harness import Solution
from kerneldojo.tasks import get_task


def main(spec_path):
    with open(spec_path) as f:
        spec = json.load(f)
    device = resolve_device(spec["device"])
    task = get_task(spec["task"])
    source = shipped_solutions(task.id)[spec["language"]].read_text()
    solution = Solution(task, compile_submission(task, source, spec["language"], device.arch), device)
    cases = {str(c): c for c in task.cases(spec["shape_set"])}
    done = []
    for item in spec["cases"]:
        shape = cases[item["case"]].shape
        # Output specs come from the parent: calling the reference here would launch kernels too.
        templates = tuple(torch.empty(size, dtype=getattr(torch, dtype), device=device.torch_device)
                          for size, dtype in item["outputs"])
        sets = [task.reference.make_inputs(shape, 1000 + s, device.torch_device) for s in range(spec["sets"])]
        outs = [poisoned_like(templates) for _ in sets]
        synchronize(device)
        for i in range(spec["warmup"] + spec["launches"]):
            k = i % len(sets)
            solution.run(sets[k], shape, outs[k], watch=False)
            synchronize(device)
        done.append(item["case"])
        del sets, outs, templates
    solution.close()
    with open(spec["done_path"], "w") as f:
        json.dump({"cases": done}, f)


if __name__ == "__main__":
    main(sys.argv[1])
'''


def find_ncu() -> str | None:
    from kerneldojo.sandbox.device import cuda_tool

    if found := cuda_tool("ncu"):
        return found
    for pattern in ("/usr/local/cuda*/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu",
                    "/usr/local/NVIDIA-Nsight-Compute*/ncu"):
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[-1]
    return None


def ncu_command(ncu: str, pattern: str, driver: str, spec: str) -> list[str]:
    # --clock-control none: never lock or change the GPU's clocks (ncu's default locks them to base).
    return [ncu, "--metrics", NCU_METRIC, "--csv", "--clock-control", "none", "--cache-control", "all",
            "-k", f"regex:{pattern}", sys.executable, driver, spec]


def parse_ncu_csv(text: str, metric: str = NCU_METRIC) -> list[dict]:
    """The rows of ncu's `--csv` details page for `metric`, in launch order: id, kernel, ms.
    Lines that are not CSV (==PROF== messages, the program's own output) are skipped."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines)
                  if line.startswith('"') and '"Metric Name"' in line and '"Metric Value"' in line), None)
    if start is None:
        return []
    table = [line for line in lines[start:] if line.startswith('"')]
    reader = csv.DictReader(table)
    rows = []
    for r in reader:
        if r.get("Metric Name") != metric:
            continue
        unit = (r.get("Metric Unit") or "").strip()
        if unit not in UNIT_MS:
            raise ValueError(f"unknown unit {unit!r} for {metric}")
        value = float((r.get("Metric Value") or "").replace(",", ""))
        rows.append({"id": int(r.get("ID") or len(rows)), "kernel": r.get("Kernel Name", ""),
                     "ms": value * UNIT_MS[unit]})
    return sorted(rows, key=lambda r: r["id"])


def group_launches(rows: list[dict], pattern: str, cases: list[str], warmup: int, launches: int) -> dict[str, list]:
    """Split the profiled launches (in order) into cases and drop each case's warm-up launches."""
    from kerneldojo.graders.profile import kernel_base_name

    mine = [r for r in rows if re.fullmatch(pattern, kernel_base_name(r["kernel"]))]
    per_case = warmup + launches
    if len(mine) != per_case * len(cases):
        names = sorted({kernel_base_name(r["kernel"]) for r in rows})
        raise ValueError(f"expected {per_case * len(cases)} launches of {pattern!r} ({len(cases)} cases x "
                         f"{per_case}), ncu reported {len(mine)} (kernels seen: {names[:8]})")
    return {case: [r["ms"] for r in mine[i * per_case + warmup:(i + 1) * per_case]] for i, case in enumerate(cases)}


def judge_figures(report: Report, task_id: str) -> dict[str, dict]:
    """Median over the repeat section's steps of the event median and of the busy time, per case."""
    for entry in report.data.get("repeat", {}).get("tasks", []):
        if entry.get("task") == task_id:
            return {s["case"]: {"event_ms": s["event"].get("median"), "busy_ms": s["busy"].get("median"),
                                "steps": s["event"].get("n"), "language": entry.get("language")}
                    for s in entry.get("summary", [])}
    return {}


def section_ncu(report: Report, device, out: Path, launches: int, warmup: int, stop_at: float,
                ncu: str | None, shape_set: str = "bench") -> None:
    import torch

    from kerneldojo.tasks import get_task

    section = report.data["ncu"]
    section["ncu"] = ncu = ncu or find_ncu()
    if ncu is None:
        section["status"] = "missing: no ncu on PATH, in CUDA_HOME/bin or /usr/local/cuda*/bin"
        return
    with contextlib.suppress(Exception):
        section["version"] = subprocess.run([ncu, "--version"], capture_output=True, text=True,
                                            timeout=30).stdout.strip().splitlines()[-1]
    workdir = Path(tempfile.mkdtemp(prefix="bench_timing_ncu_"))
    driver = workdir / "driver.py"
    driver.write_text(DRIVER)
    repeat_languages = {e["task"]: e.get("language") for e in report.data.get("repeat", {}).get("tasks", [])}
    for task_id, pattern in NCU_KERNELS.items():
        language = repeat_languages.get(task_id) or next(lang for t, langs in REPEAT_TASKS if t == task_id
                                                          for lang in langs)
        entry = {"task": task_id, "language": language, "pattern": pattern, "warmup": warmup, "launches": launches}
        section["tasks"].append(entry)
        remaining = stop_at - time.perf_counter()
        if section.get("status"):  # ncu refused once: it will refuse the next task too
            entry["error"] = f"skipped: {section['status']}"
            report.save()
            continue
        if remaining < NCU_MIN_S:
            entry["error"] = f"skipped: {remaining:.0f} s of the time budget left"
            report.save()
            continue
        if language == "triton" and task_id == "matmul":
            entry["error"] = "skipped: the Triton matmul baseline autotunes, so its launches per call are not known"
            report.save()
            continue
        try:
            task = get_task(task_id)
            items = []
            for case in task.cases(shape_set):
                expected = task.expected(*task.reference.make_inputs(case.shape, 0, device))
                items.append({"case": str(case), "outputs": [[list(t.shape), str(t.dtype).removeprefix("torch.")]
                                                             for t in expected]})
                del expected
            torch.cuda.empty_cache()
            spec = {"device": str(device), "task": task_id, "language": language, "shape_set": shape_set,
                    "cases": items, "warmup": warmup, "launches": launches, "sets": 2,
                    "done_path": str(workdir / f"{task_id}.done.json")}
            spec_path = workdir / f"{task_id}.json"
            spec_path.write_text(json.dumps(spec))
            cmd = ncu_command(ncu, pattern, str(driver), str(spec_path))
            entry["command"] = " ".join(cmd)
            started = time.perf_counter()
            limit = max(10.0, min(NCU_TASK_LIMIT_S, stop_at - time.perf_counter()))
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit,
                                  cwd=Path(__file__).resolve().parents[2])
            entry["wall_s"] = time.perf_counter() - started
            (out / f"ncu_{task_id}.csv").write_text(proc.stdout)
            combined = proc.stdout + proc.stderr
            entry["returncode"] = proc.returncode
            entry["driver_finished"] = Path(spec["done_path"]).exists()
            if "ERR_NVGPUCTRPERM" in combined:
                entry["error"] = "refused: ERR_NVGPUCTRPERM (no permission for the GPU performance counters)"
                section["status"] = entry["error"]
            rows = parse_ncu_csv(proc.stdout)
            if not rows:
                entry.setdefault("error", f"no {NCU_METRIC} rows in ncu's output (exit {proc.returncode})")
                entry["output_tail"] = combined[-3000:]
            else:
                grouped = group_launches(rows, pattern, [i["case"] for i in items], warmup, launches)
                judged = judge_figures(report, task_id)
                entry["cases"] = []
                for case, values in grouped.items():
                    ncu_ms = statistics.median(values)
                    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
                    j = judged.get(case, {}) if judged.get(case, {}).get("language") == language else {}
                    row = {"case": case, "launches": len(values), "ncu_median_ms": ncu_ms, "ncu_iqr_ms": q[2] - q[0],
                           "ncu_ms": values, "judge_event_ms": j.get("event_ms"), "judge_busy_ms": j.get("busy_ms"),
                           "judge_steps": j.get("steps")}
                    for key in ("event", "busy"):
                        v = row[f"judge_{key}_ms"]
                        row[f"{key}_vs_ncu"] = (v - ncu_ms) / ncu_ms if v is not None and ncu_ms > 0 else None
                    off = row["event_vs_ncu"]
                    row["within_goal"] = abs(off) < GOAL_NCU if off is not None else None
                    entry["cases"].append(row)
        except subprocess.TimeoutExpired as e:
            entry["error"] = f"ncu ran past the time budget ({e.timeout:.0f} s)"
        except Exception as e:
            entry["error"] = _error(e)
        report.save()
        print(f"ncu {task_id}: {entry.get('error') or 'ok'}", file=sys.stderr, flush=True)
    shutil.rmtree(workdir, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# Markdown.


def _us(ms: float | None, digits: int = 4) -> str:
    if ms is None:
        return "–"
    return f"{ms * 1e3:,.0f}" if ms >= 1.0 else f"{ms * 1e3:.{digits}g}"


def _pct(x: float | None, signed: bool = False, digits: int = 2) -> str:
    if x is None:
        return "–"
    return f"{x * 100:+.{digits}f} %" if signed else f"{x * 100:.{digits}f} %"


def _yes(flag: bool | None) -> str:
    return "–" if flag is None else ("yes" if flag else "**no**")


def render(data: dict) -> str:
    meta = data.get("meta", {})
    lines = [f"Device: {meta.get('device', '?')}; {meta.get('date', '?')}; torch {meta.get('torch', '?')}, "
             f"Triton {meta.get('triton', '?')}, driver {meta.get('cuda_driver', '?')}, nvcc {meta.get('nvcc', '?')}; "
             f"L2 {meta.get('l2_bytes', 0) / 2**20:.0f} MiB; measured copy bandwidth "
             f"{(meta.get('copy_bytes_per_s') or 0) / 1e12:.3g} TB/s; run took {meta.get('elapsed_s', 0):.0f} s.", ""]
    rep = data.get("repeat")
    if rep is not None:
        lines += ["### Repeatability: one baseline, separate judge steps", ""]
        if rep.get("error"):
            lines += [f"Section failed: `{rep['error'].splitlines()[0]}`", ""]
        lines += ["| task | lang | case | ok steps | median of medians (µs) | min–max (µs) | (max−min)/median "
                  "| stdev/mean | busy: (max−min)/median | goal < 2 % (≥ 20 µs) | per-step medians, in order (µs) |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for entry in rep.get("tasks", []):
            if entry.get("error") or not entry.get("summary"):
                why = (entry.get("error") or "no ok step").splitlines()[0][:160]
                tried = ", ".join(f"{t['language']}: {t['status']}" for t in entry.get("tried", []))
                lines.append(f"| {entry['task']} | {entry.get('language') or '–'} | {why} {tried} | | | | | | | | |")
            for s in entry.get("summary", []):
                e, b = s.get("event", {}), s.get("busy", {})
                goal = _yes(s.get("goal_met")) if s.get("in_scope") else "under 20 µs"
                lines.append(f"| {entry['task']} | {entry['language']} | {s['case']} | {e.get('n', 0)} | "
                             f"{_us(e.get('median'))} | {_us(e.get('min'))}–{_us(e.get('max'))} | "
                             f"{_pct(e.get('range_rel'))} | {_pct(e.get('cv'))} | {_pct(b.get('range_rel'))} "
                             f"| {goal} | {', '.join(_us(v) for v in s.get('per_step_ms', []))} |")
        lines.append("")
    nc = data.get("ncu")
    if nc is not None:
        lines += ["### Agreement with Nsight Compute", ""]
        lines.append(f"ncu: {nc.get('ncu') or 'not found'}; {nc.get('version', '')}; `--metrics {NCU_METRIC} "
                     "--clock-control none --cache-control all`. Judge figures: median over the repeat section's "
                     "steps.")
        if nc.get("status"):
            lines.append(f"Status: {nc['status']}")
        if nc.get("error"):
            lines.append(f"Section failed: `{nc['error'].splitlines()[0]}`")
        lines += ["", "| task | lang | case | ncu launches | ncu median (µs) | ncu IQR (µs) | judge event (µs) "
                  "| event vs ncu | judge busy (µs) | busy vs ncu | within 3 % |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for entry in nc.get("tasks", []):
            if entry.get("error") and not entry.get("cases"):
                lines.append(f"| {entry['task']} | {entry.get('language')} | {entry['error'].splitlines()[0][:200]} "
                             "| | | | | | | | |")
            for c in entry.get("cases", []):
                lines.append(f"| {entry['task']} | {entry['language']} | {c['case']} | {c['launches']} | "
                             f"{_us(c['ncu_median_ms'])} | {_us(c['ncu_iqr_ms'], 3)} | {_us(c['judge_event_ms'])} | "
                             f"{_pct(c['event_vs_ncu'], True)} | {_us(c['judge_busy_ms'])} | "
                             f"{_pct(c['busy_vs_ncu'], True)} | {_yes(c['within_goal'])} |")
        lines.append("")
    lines += render_method(data)
    rg = data.get("range")
    if rg is not None:
        lines += ["### One kernel from 5 µs to 50 ms (Triton `vector_add`, `time_calls` over a refilled pool)", ""]
        if rg.get("error"):
            lines += [f"Section failed: `{rg['error'].splitlines()[0]}`", ""]
        lines += ["| target | n | passes | pool sets | runs | median (µs) | IQR (µs) | RSE | busy (µs) | "
                  "event − busy (µs) | % copy roofline (event / busy / scored) | correct |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in rg.get("rows", []):
            target = f"{r['target_ms'] * 1e3:g} µs" if r["target_ms"] < 1 else f"{r['target_ms']:g} ms"
            if r.get("error"):
                lines.append(f"| {target} | {r['error'].splitlines()[0][:200]} | | | | | | | | | | |")
                continue
            gap = (r["median_ms"] - r["busy_ms"]) * 1e3 if r.get("busy_ms") is not None else None
            lines.append(f"| {target} | {r['n']:,} | {r['passes']} | {r['sets']} | {r['runs']} | "
                         f"{_us(r['median_ms'])} | {_us(r['iqr_ms'], 3)} | {_pct(r['rse'])} | {_us(r['busy_ms'])} | "
                         f"{'–' if gap is None else f'{gap:.3g}'} | {_pct(r['roofline_event'], digits=0)} / "
                         f"{_pct(r['roofline_busy'], digits=0)} / {_pct(r['roofline_scored'], digits=0)} | "
                         f"{'yes' if r['correct'] else '**no**'} |")
        if rg.get("note"):
            lines.append(f"\n{rg['note']}")
        lines.append("")
    return "\n".join(lines)


def render_method(data: dict) -> list[str]:
    me = data.get("method")
    if me is None:
        return []
    ncu = {(e["task"], c["case"]): c["ncu_median_ms"] for e in data.get("ncu", {}).get("tasks", [])
           for c in e.get("cases", [])}
    names = list(METHOD_VARIANTS)
    lines = ["### The method beside the variants it replaced (event medians, µs; vs ncu in brackets)", "",
             "Variants: " + "; ".join(f"**{n}**: L2 flushed by a {f}, {HEAD_STARTS[h]}{', every core busy' * loaded}"
                                      for n, (f, h, loaded) in METHOD_VARIANTS.items()) + ".", "",
             "| task | case | ncu (µs) | " + " | ".join(names) + " |", "|---|---|---|" + "---|" * len(names)]
    if me.get("error"):
        lines[1:1] = [f"Section failed: `{me['error'].splitlines()[0]}`", ""]
    for row in me.get("tasks", []):
        ref = ncu.get((row["task"], row["case"]))
        cells = []
        for n in names:
            v = row["variants"].get(n, {}).get("median_ms")
            cells.append("–" if v is None else _us(v) + (f" ({_pct((v - ref) / ref, True, 1)})" if ref else ""))
        error = f" {row['error'].splitlines()[0][:160]}" if row.get("error") else ""
        lines.append(f"| {row['task']} | {row['case']}{error} | {_us(ref)} | " + " | ".join(cells) + " |")
    if me.get("note"):
        lines.append(f"\n{me['note']}")
    return [*lines, ""]


# ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="folder for timing.json, timing.md and ncu's raw CSV")
    parser.add_argument("--render", type=Path, help="print the tables of a saved timing.json and exit")
    parser.add_argument("--budget-s", type=float, default=400.0, help="stop starting new work after this (400)")
    parser.add_argument("--steps", type=int, default=10, help="judge steps per task in the repeat section (10)")
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {SECTIONS}")
    parser.add_argument("--isolation", default="process", choices=("process", "none"), help="the judge's backend")
    parser.add_argument("--ncu", help="path of ncu (default: PATH, CUDA_HOME/bin, /usr/local/cuda*/bin)")
    parser.add_argument("--ncu-launches", type=int, default=15, help="profiled launches per case (15)")
    parser.add_argument("--ncu-warmup", type=int, default=2, help="unprofiled-for-the-figure warm-up calls (2)")
    args = parser.parse_args(argv)
    if args.render:
        print(render(json.loads(args.render.read_text())))
        return 0
    if args.out is None:
        parser.error("--out DIR is required (or --render FILE)")
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    if unknown := set(sections) - set(SECTIONS):
        parser.error(f"unknown sections {sorted(unknown)}; choose from {SECTIONS}")
    return run(args, sections)


def run(args, sections: list[str]) -> int:
    import torch

    started = time.perf_counter()
    deadline = started + args.budget_s
    args.out.mkdir(parents=True, exist_ok=True)
    if not torch.cuda.is_available():
        print("bench_timing needs a CUDA GPU", file=sys.stderr)
        return 2
    from kerneldojo.graders.roofline import measured_peaks
    from kerneldojo.judge import versions
    from kerneldojo.sandbox.device import resolve_device

    dev = resolve_device("cuda")
    meta = {"device": dev.name, "date": time.strftime("%Y-%m-%d"), "l2_bytes": dev.l2_bytes, "args": vars(args),
            **versions().model_dump()}
    report = Report(args.out, meta)
    try:
        peaks = measured_peaks(dev.torch_device)
        meta["copy_bytes_per_s"] = peaks.dram_bytes_per_s
    except Exception as e:
        meta["peaks_error"] = _error(e)
        peaks = None
    report.save()
    for name in sections:
        report.data[name] = {"rows": []} if name == "range" else {"tasks": []}
        try:
            if name == "range":
                if peaks is None:
                    raise RuntimeError("no measured copy bandwidth")
                section_range(report, dev.torch_device, dev.l2_bytes, peaks.dram_bytes_per_s,
                              min(deadline, time.perf_counter() + RANGE_BUDGET_S))
            elif name == "repeat":
                later = sections[sections.index(name):]
                reserve = NCU_RESERVE_S * ("ncu" in later) + METHOD_RESERVE_S * ("method" in later)
                section_repeat(report, args.steps, args.isolation, args.out, deadline - reserve)
            elif name == "method":
                section_method(report, dev.torch_device, dev.l2_bytes, deadline - (NCU_RESERVE_S if "ncu" in sections
                               else 0.0))
            elif name == "ncu":
                section_ncu(report, dev.torch_device, args.out, args.ncu_launches, args.ncu_warmup, deadline,
                            args.ncu)
        except Exception as e:
            report.data[name]["error"] = _error(e)
        meta["elapsed_s"] = time.perf_counter() - started
        report.save()
        torch.cuda.empty_cache()
    text = render(report.data)
    (args.out / "timing.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
