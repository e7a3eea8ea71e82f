"""Where a Triton baseline's first calls go, no judge: per test and bench case of a task, the first call's seconds
(JIT, autotuning) against the second's, and each autotuner's choice with every config's time. The data for
choosing which configs a shipped baseline keeps (issue 14: a level-3 step within 10 s is mostly the kernel's own
JIT and autotuning over the task's shapes).

    python baselines/bench/autotune_study.py OUT_DIR [--tasks flash_attention,mlp_block]

Runs each task in a fresh process with an empty Triton cache. Writes OUT_DIR/autotune_study.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import report


def study_here(task_id: str) -> dict:
    from bench_side_by_side import first_two_calls, load
    from triton.runtime.autotuner import Autotuner

    from kerneldojo.baselines import shipped_solutions
    from kerneldojo.sandbox.device import resolve_device
    from kerneldojo.tasks import get_task

    task, device = get_task(task_id), resolve_device("auto")
    fn = load(shipped_solutions(task_id)["triton"].read_text())
    tuners = [v for v in fn.__globals__.values() if isinstance(v, Autotuner)]
    seen = {id(t): set() for t in tuners}
    cases, choices = [], []
    for kind in ("small",) if device.mode == "cpu" else ("test", "bench"):
        for case in task.cases(kind):
            first, second = first_two_calls(task, fn, device, case)
            cases.append({"kind": kind, "case": str(case), "first_s": first, "second_s": second})
            for tuner in tuners:
                for key, best in tuner.cache.items():
                    if key in seen[id(tuner)]:
                        continue
                    seen[id(tuner)].add(key)
                    timings = {str(c): (t if isinstance(t, float) else list(t))
                               for c, t in (getattr(tuner, "configs_timings", None) or {}).items()}
                    choices.append({"kernel": tuner.base_fn.__name__, "case": str(case), "key": str(key),
                                    "best": str(best), "bench_s": getattr(tuner, "bench_time", None),
                                    "timings_ms": timings})
    return {"task": task_id, "cases": cases, "choices": choices,
            "jit_s": sum(max(0.0, c["first_s"] - c["second_s"]) for c in cases)}


def main() -> None:
    if sys.argv[1:2] == ["--here"]:
        print(json.dumps(study_here(sys.argv[2])))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--tasks", default="flash_attention,flash_attention_gqa,mlp_block,transformer_block,fp8_gemm")
    args = parser.parse_args()
    rows = []
    for task_id in args.tasks.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "TRITON_CACHE_DIR": tmp}
            started = time.perf_counter()
            done = subprocess.run([sys.executable, __file__, "--here", task_id], env=env, capture_output=True,
                                  text=True)
        if done.returncode != 0:
            rows.append({"task": task_id, "error": done.stderr[-1500:]})
        else:
            row = json.loads(done.stdout.strip().splitlines()[-1])
            rows.append({**row, "process_s": time.perf_counter() - started})
        print(json.dumps(rows[-1])[:400], file=sys.stderr, flush=True)
    table = ["| task | process (s) | JIT + autotuning (s) | autotuned keys | first calls (s) per case |",
             "|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            table.append(f"| {r['task']} | error: {r['error'][-200:]!r} | | | |")
            continue
        firsts = ", ".join(f"{c['first_s']:.1f}" for c in r["cases"])
        table.append(f"| {r['task']} | {r['process_s']:.1f} | {r['jit_s']:.1f} | {len(r['choices'])} | {firsts} |")
    report.write(args.out, "autotune_study", {"rows": rows}, table)


if __name__ == "__main__":
    main()
