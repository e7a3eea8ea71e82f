"""Every shipped baseline on the GPU, side by side with eager PyTorch, torch.compile and the
measured roofline, in one run. Saves the EvalResults as JSON after each one and prints a
markdown table at the end (or from a saved file with --render).

    python baselines/bench/bench_baselines.py [--task T ...] [--skip T ...] --json results.json
    python baselines/bench/bench_baselines.py --render results.json [--merge more.json ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", action="append", help="only these tasks")
    parser.add_argument("--skip", action="append", default=[], help="not these tasks")
    parser.add_argument("--json", help="where to save the results")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--budget", type=float, default=1.0, help="timing budget per case and contender, s")
    parser.add_argument("--render", help="print the table of a saved run instead of measuring")
    parser.add_argument("--merge", action="append", default=[], help="with --render: add another saved run")
    args = parser.parse_args()
    if args.render:
        data = json.loads(Path(args.render).read_text())
        for extra in args.merge:
            data["results"] += json.loads(Path(extra).read_text())["results"]
        print(render(data))
        return
    data = measure(args)
    print(render(data))


def measure(args) -> dict:
    from kerneldojo.baselines import shipped_solutions
    from kerneldojo.graders.roofline import measured_peaks
    from kerneldojo.judge import Judge
    from kerneldojo.tasks import list_tasks

    judge = Judge(args.device, timing_budget_s=args.budget)
    peaks = measured_peaks(judge.device.torch_device)
    data = {"device": judge.device.name, "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
            "peaks": {"dram_bytes_per_s": peaks.dram_bytes_per_s, "flops_per_s": peaks.flops_per_s}, "results": []}
    for task_id in args.task or list_tasks():
        if task_id in args.skip:
            continue
        for language, path in shipped_solutions(task_id).items():
            start = time.perf_counter()
            result = judge.evaluate(task_id, path.read_text(), language)
            print(f"{task_id} {language}: {result.summary()} ({time.perf_counter() - start:.0f} s)",
                  file=sys.stderr, flush=True)
            data["results"].append(result.model_dump(mode="json"))
            if args.json:  # after each result, so a run cut short keeps what it measured
                with open(args.json, "w") as f:
                    json.dump(data, f, indent=1)
    return data


def render(data: dict) -> str:
    def fmt(x, spec):
        return "-" if x is None else format(x, spec)

    flops = data["peaks"]["flops_per_s"]
    lines = [
        f"Device: {data['device']}, {data['date']}, torch {data['torch']}. Measured peaks: copy "
        f"{data['peaks']['dram_bytes_per_s'] / 1e12:.2f} TB/s (read + write), "
        f"cuBLAS bf16 {flops['bfloat16'] / 1e12:.0f} TFLOP/s, "
        f"fp32 (no TF32) {flops['float32'] / 1e12:.1f} TFLOP/s, int8 {flops['int8'] / 1e12:.0f} TOP/s.",
        "",
        "| task | lang | case | time (ms) | eager (ms) | torch.compile (ms) | x eager | x compile | floor (ms) "
        "| % roofline |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in data["results"]:
        if not r["timings"]:
            why = " ".join(r["messages"])[:100]
            lines.append(f"| {r['task']} | {r['language']} | {r['status']}: {why} | | | | | | | |")
        for t in r["timings"]:
            sub, eager, comp = t["submission"]["median_ms"], t["eager"], t["compiled"]
            eager_ms, comp_ms = eager and eager["median_ms"], comp and comp["median_ms"]
            lines.append(
                f"| {r['task']} | {r['language']} | {t['case']} | {sub:.4g} | {fmt(eager_ms, '.4g')} "
                f"| {fmt(comp_ms, '.4g')} | {fmt(eager_ms and eager_ms / sub, '.2f')} "
                f"| {fmt(comp_ms and comp_ms / sub, '.2f')} | {fmt(t['floor_ms'], '.4g')} "
                f"| {fmt(t['floor_ms'] and 100 * t['floor_ms'] / sub, '.0f')} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
