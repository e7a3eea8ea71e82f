"""Step wall time of whichever kerneldojo is importable, for comparing two versions side by side on one GPU
(run it once per version, alternating): a judge evaluates the shipped baseline of each (task, language) with
a new comment every step, so no build or result is reused; the first step is reported apart (JIT, nvcc,
reference timings).

    python baselines/bench/bench_step_compare.py OUT.json [--steps 8] [--rows vector_add:triton,softmax:cuda]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--rows", default="vector_add:triton,vector_add:cuda,softmax:triton,softmax:cuda")
    args = parser.parse_args()
    import kerneldojo
    from kerneldojo.judge import Judge

    judge, rows = Judge("auto"), []
    for row in args.rows.split(","):
        task, language = row.split(":")
        path = REPO / "baselines" / task / ("triton.py" if language == "triton" else "cuda.cu")
        comment = "#" if language == "triton" else "//"
        walls, statuses, phases = [], [], []
        for _ in range(args.steps):
            source = f"{path.read_text()}\n{comment} {uuid.uuid4().hex}\n"
            started = time.perf_counter()
            result = judge.evaluate(task, source, language)
            walls.append(time.perf_counter() - started)
            statuses.append(result.status)
            phases.append(getattr(result, "phases", None) or {})  # the previous main has none
            print(f"{task} {language} step {len(walls)}: {walls[-1]:.2f} s, {result.status}", flush=True)
            # rewritten after every step: a run cut at its limit keeps the steps it took
            args.out.write_text(json.dumps({"kerneldojo": kerneldojo.__file__, "rows": rows, "partial": {
                "task": task, "language": language, "walls_s": walls, "statuses": statuses, "phases_s": phases}},
                indent=1))
        warm = walls[1:] or walls
        rows.append({"task": task, "language": language, "first_s": walls[0], "p50_s": statistics.median(warm),
                     "min_s": min(warm), "max_s": max(warm), "statuses": statuses, "walls_s": walls,
                     "phases_p50_s": {k: statistics.median(p.get(k, 0.0) for p in phases[1:] or phases)
                                      for k in phases[-1]}})
        print(f"{kerneldojo.__file__}: {task} {language} first {walls[0]:.2f} s, warm p50 "
              f"{statistics.median(warm):.2f} s, statuses {sorted(set(statuses))}, phases p50 "
              f"{ {k: round(v, 2) for k, v in rows[-1]['phases_p50_s'].items()} }", flush=True)
    args.out.write_text(json.dumps({"kerneldojo": kerneldojo.__file__, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
