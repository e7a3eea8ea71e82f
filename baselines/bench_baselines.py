"""Every shipped baseline on the GPU, side by side with eager PyTorch, torch.compile and the
measured roofline, in one run. Writes the EvalResults as JSON and prints a markdown table.

    python -m kerneldojo.baselines.bench_baselines [--task T ...] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch


def fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def main() -> None:
    from kerneldojo.baselines import shipped_solutions
    from kerneldojo.graders.roofline import measured_peaks
    from kerneldojo.judge import Judge
    from kerneldojo.tasks import list_tasks

    parser = argparse.ArgumentParser()
    parser.add_argument("--task", action="append")
    parser.add_argument("--json")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    judge = Judge(args.device)
    peaks = measured_peaks(judge.device.torch_device)
    results = []
    for task_id in args.task or list_tasks():
        for language, path in shipped_solutions(task_id).items():
            start = time.perf_counter()
            result = judge.evaluate(task_id, path.read_text(), language)
            print(f"{task_id} {language}: {result.summary()} ({time.perf_counter() - start:.0f} s)",
                  file=sys.stderr, flush=True)
            results.append(result)
    date = time.strftime("%Y-%m-%d")
    print(f"device: {judge.device.name}, {date}, torch {torch.__version__}; measured peaks: "
          f"copy {peaks.dram_bytes_per_s / 1e12:.2f} TB/s, cuBLAS bf16 {peaks.flops_per_s['bfloat16'] / 1e12:.0f}, "
          f"fp32 {peaks.flops_per_s['float32'] / 1e12:.1f} TFLOP/s, int8 {peaks.flops_per_s['int8'] / 1e12:.0f} TOP/s")
    print("\n| task | lang | status | case | time (ms) | eager (ms) | torch.compile (ms) | x eager | x compile "
          "| floor (ms) | % roofline |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        for t in r.timings or [None]:
            if t is None:
                print(f"| {r.task} | {r.language} | {r.status} | {' '.join(r.messages)[:80]} |||||||")
                continue
            print(f"| {r.task} | {r.language} | {r.status} | {t.case} | {t.submission.median_ms:.4g} "
                  f"| {fmt(t.eager and t.eager.median_ms, '.4g')} | {fmt(t.compiled and t.compiled.median_ms, '.4g')} "
                  f"| {fmt(t.speedup, '.2f')} | {fmt(t.speedup_vs_compile, '.2f')} | {fmt(t.floor_ms, '.4g')} "
                  f"| {fmt(t.roofline_fraction and 100 * t.roofline_fraction, '.0f')} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": judge.device.name, "date": date, "torch": torch.__version__,
                       "peaks": {"dram_bytes_per_s": peaks.dram_bytes_per_s, "flops_per_s": peaks.flops_per_s},
                       "results": [r.model_dump(mode="json") for r in results]}, f, indent=1)


if __name__ == "__main__":
    main()
