"""What the process backend's sandbox costs per step, and whether a long run leaks.

    python baselines/bench/bench_sandbox.py overhead [--steps 10] [--device cpu]
    python baselines/bench/bench_sandbox.py leaks [--steps 200] [--device cpu]

`overhead`: the median wall time of vector_add steps on `Judge(device)` (a worker per step,
namespaces and limits as available), on the same judge with the worker's namespaces turned off
(`--plain`: the worker keeps only its process group and rlimits, as before `sandbox.isolation`),
and on `Judge(device, isolation="none")` (no worker). A step on the process backend includes
starting the next spare worker in the background; a step waits for a spare still warming up, so
steps are spaced by `--gap` seconds (default: long enough for a spare to be ready).

`leaks`: that many consecutive steps on one judge; the judge's open file descriptors, its child
processes, the worker scratch folders in the temp folder, the worker cgroups and the judge's RSS
are printed at the start and the end. None may grow (RSS within allocator noise).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

SOURCE = {"cpu": "triton", "gpu": "cuda"}


def _source(language: str) -> str:
    from kerneldojo.baselines import shipped_solutions

    return shipped_solutions("vector_add")[language].read_text()


def _steps(judge, n: int, gap_s: float, language: str) -> list[float]:
    source, times = _source(language), []
    for _ in range(n):
        started = time.perf_counter()
        result = judge.evaluate("vector_add", source, language)
        times.append(time.perf_counter() - started)
        assert result.status in ("ok", "compiled"), result.messages
        time.sleep(gap_s)
    return times


def overhead(args) -> None:
    from kerneldojo.judge import Judge
    from kerneldojo.sandbox import isolation

    language = SOURCE["gpu" if args.device != "cpu" else "cpu"]
    rows = []
    for name, kwargs, plain in (("process", {}, False), ("process, no namespaces", {}, True),
                                ("none", {"isolation": "none"}, False)):  # fmt: skip
        saved = isolation.plan
        if plain:
            isolation.plan = lambda *a, **k: None  # the worker hardens as before sandbox.isolation
        try:
            judge = Judge(args.device, timed=False, **kwargs)
            _steps(judge, 2, args.gap, language)  # warm: compile cache, first spare, reference
            times = _steps(judge, args.steps, args.gap, language)
        finally:
            isolation.plan = saved
        rows.append((name, statistics.median(times), min(times), max(times)))
        print(f"{name:24s} median {rows[-1][1] * 1e3:8.1f} ms  min {rows[-1][2] * 1e3:8.1f}  "
              f"max {rows[-1][3] * 1e3:8.1f}  ({args.steps} steps)", flush=True)  # fmt: skip


def _snapshot() -> dict:
    me = os.getpid()
    children = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:
            children.append(int(pid))
    temp = Path(tempfile.gettempdir())
    rss_kib = next(int(line.split()[1]) for line in Path("/proc/self/status").read_text().splitlines()
                   if line.startswith("VmRSS"))  # fmt: skip
    cgroups = sum(len(list(Path(root).glob(f"**/kerneldojo-worker-{me}-*"))) for root in _cgroup_roots())
    return {"fds": len(os.listdir("/proc/self/fd")), "children": len(children),
            "scratch_dirs": len(list(temp.glob(f"kerneldojo-worker-{me}-*"))), "cgroups": cgroups,
            "rss_mib": round(rss_kib / 1024, 1)}  # fmt: skip


def _cgroup_roots() -> list[str]:
    roots = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        if " - cgroup" in line:
            roots.append(line.split()[4])
    return roots


def leaks(args) -> None:
    from kerneldojo.judge import Judge

    language = SOURCE["gpu" if args.device != "cpu" else "cpu"]
    judge = Judge(args.device, timed=False)
    _steps(judge, 3, args.gap, language)  # first worker, first spare, caches
    time.sleep(2)
    start = _snapshot()
    print("start", start, flush=True)
    times = _steps(judge, args.steps, args.gap, language)
    time.sleep(2)  # workers are reaped off the step's path
    end = _snapshot()
    print("end  ", end, flush=True)
    print(f"{args.steps} steps, median {statistics.median(times) * 1e3:.1f} ms")
    grew = [k for k in ("fds", "children", "scratch_dirs", "cgroups") if end[k] > start[k]]
    if grew:
        print("GREW:", ", ".join(grew))
        sys.exit(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["overhead", "leaks"])
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--gap", type=float, default=None,
                        help="seconds between steps (overhead: 20 on CPU, 5 on GPU, so a spare is warm; leaks: 0)")
    args = parser.parse_args()
    args.steps = args.steps or (10 if args.what == "overhead" else 200)
    if args.gap is None:  # overhead: let the spare warm up; leaks: back to back
        args.gap = 0.0 if args.what == "leaks" else (20.0 if args.device == "cpu" else 5.0)
    {"overhead": overhead, "leaks": leaks}[args.what](args)


if __name__ == "__main__":
    main()
