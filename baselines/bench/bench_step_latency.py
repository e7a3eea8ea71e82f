"""End-to-end `env.step` latency per language: the first step (cold: nvcc or Triton JIT, reference
timings, torch.compile) and warm steps, each (task, language) in a fresh process with an empty
build cache.

    python baselines/bench/bench_step_latency.py [--steps 10] [--device cuda] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

TASKS = ("vector_add", "matmul")


def one(task_id: str, language: str, steps: int, device: str) -> dict:
    import kerneldojo
    from kerneldojo.baselines import shipped_solutions

    source = shipped_solutions(task_id)[language].read_text()
    env = kerneldojo.make(task_id, language=language, device=device, max_turns=steps)
    env.reset(seed=0)
    seconds, statuses = [], []
    for _ in range(steps):
        start = time.perf_counter()
        _, _, _, _, info = env.step(source)
        seconds.append(time.perf_counter() - start)
        statuses.append(info["status"])
    result = info["result"]
    return {
        "task": task_id, "language": language, "device": result.device, "statuses": sorted(set(statuses)),
        "first_s": seconds[0], "warm_median_s": statistics.median(seconds[1:]),
        "warm_min_s": min(seconds[1:]), "warm_max_s": max(seconds[1:]), "steps": steps,
        "kernel_ms": result.timings[-1].submission.median_ms if result.timings else None,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--json")
    parser.add_argument("--language", action="append", help="only these languages (repeatable)")
    parser.add_argument("--one", nargs=2, metavar=("TASK", "LANGUAGE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(*args.one, args.steps, args.device)))
        return
    from kerneldojo.baselines import shipped_solutions

    rows = []
    for task_id in TASKS:
        for language in shipped_solutions(task_id):
            if args.language and language not in args.language:
                continue
            with tempfile.TemporaryDirectory() as cache:
                out = subprocess.run(
                    [sys.executable, __file__, "--one", task_id, language,
                     "--steps", str(args.steps), "--device", args.device],
                    env={**os.environ, "KERNELDOJO_CACHE": cache}, capture_output=True, text=True, check=True,
                )  # fmt: skip
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(f"device: {rows[0]['device']}, {time.strftime('%Y-%m-%d')}, {args.steps} steps per row")
    print("| task | language | status | first step (s) | warm step, median (s) | warm min-max (s) | kernel (ms) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['task']} | {r['language']} | {','.join(r['statuses'])} | {r['first_s']:.2f} | "
              f"{r['warm_median_s']:.2f} | {r['warm_min_s']:.2f}-{r['warm_max_s']:.2f} | {r['kernel_ms']:.4g} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
