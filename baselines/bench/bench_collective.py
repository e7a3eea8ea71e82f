"""all_reduce on two GPUs of one host: the shipped baseline and starter against NCCL, as the judge sees them.

    python baselines/bench/bench_collective.py --out DIR [--budget S]

Each solution goes through `Judge("cuda:0").evaluate`, so what is measured is what an agent is
scored on: a worker per rank, ranks aligned on the GPU before every timed call, cold L2, a fixed 40
runs per case, and NCCL's all-reduce (torch.distributed, in place) timed by the same code in clean
rank processes. Bus bandwidth as nccl-tests define it: busbw = algbw * 2 * (ranks - 1) / ranks,
algbw = bytes of x / time. Writes collective.json and collective.md to DIR and prints the table.
"""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

import torch

from kerneldojo.baselines import shipped_solutions
from kerneldojo.judge import Judge, versions
from kerneldojo.tasks import get_task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget", type=float, default=2.0, help="the judge's timing budget per case, s")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    task = get_task("all_reduce")
    judge = Judge("cuda:0", timing_budget_s=args.budget, reference_cache=None)
    sources = {"baseline": shipped_solutions("all_reduce")["triton"].read_text(), "starter": task.starter("triton")}
    rows, results = [], {}
    for name, source in sources.items():
        result = judge.evaluate(task, source, "triton")
        results[name] = result.model_dump(mode="json")
        print(f"{name}: {result.status} {' | '.join(result.messages)[:300]}", flush=True)
        for timing in result.timings:
            shape = dict(kv.split("=") for kv in timing.case.split()[:-1])
            ranks, n, dtype = int(shape["ranks"]), int(shape["n"]), timing.case.split()[-1]
            nbytes = n * torch.finfo(getattr(torch, dtype)).bits // 8
            nccl = timing.eager.median_ms if timing.eager else None
            rows.append((name, timing.case, nbytes, timing.scored_ms, busbw(nbytes, ranks, timing.scored_ms), nccl,
                         busbw(nbytes, ranks, nccl), nccl / timing.scored_ms if nccl else None,
                         timing.submission.iqr_ms))
    device, nccl_version = torch.cuda.get_device_name(0), ".".join(map(str, torch.cuda.nccl.version()))
    header = (f"all_reduce, {torch.cuda.device_count()} x {device}, {datetime.date.today()}, "
              f"torch {versions().torch}, Triton {versions().triton}, NCCL {nccl_version}")
    lines = [header, "", "| solution | case | MiB | ms (scored) | busbw GB/s | NCCL ms | NCCL busbw GB/s | vs NCCL "
             "| IQR ms |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]

    def fmt(v, spec):
        return "-" if v is None else format(v, spec)

    for name, case, nbytes, ms, bw, nccl, nccl_bw, ratio, iqr in rows:
        lines.append(f"| {name} | {case} | {nbytes / 2**20:.0f} | {fmt(ms, '.4f')} | {fmt(bw, '.0f')} | "
                     f"{fmt(nccl, '.4f')} | {fmt(nccl_bw, '.0f')} | {fmt(ratio, '.2f')}x | {fmt(iqr, '.4f')} |")
    table = "\n".join(lines)
    print(table)
    (args.out / "collective.md").write_text(table + "\n")
    (args.out / "collective.json").write_text(json.dumps({"header": header, "results": results}, indent=1))


def busbw(nbytes: int, ranks: int, ms: float | None) -> float | None:
    """nccl-tests' bus bandwidth of an all-reduce, GB/s."""
    return nbytes / (ms * 1e-3) * 2 * (ranks - 1) / ranks / 1e9 if ms else None


if __name__ == "__main__":
    main()
