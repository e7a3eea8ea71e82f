"""Batch throughput: a mixed batch of level-1 submissions (correct, wrong, non-compiling, crashing, hanging;
some repeated, as RL batches repeat themselves) through `GPUPool`; evaluations per GPU-hour, reused
results and each phase's share.

    python baselines/bench/bench_batch_throughput.py OUT_DIR [--count 300] [--workers-per-gpu 4] [--quick]

Writes OUT_DIR/batch_throughput.json and .md. --quick: 10 submissions on CPU slots, a 5 s run limit
(and 5 s more for the first run of a shape).
"""

from __future__ import annotations

import argparse
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import report

WRONG = ("mask = offs < n", "mask = offs < n - 1")  # in the shipped vector_add Triton: the last element unwritten
CRASH = "import os\n\n\ndef solution(x, y):\n    os._exit(3)\n"
HANG = "def solution(x, y):\n    while True:\n        pass\n"
NO_COMPILE_CUDA = 'extern "C" void solution(const float* x, const float* y, float* out, int n) { oops }\n'
NO_COMPILE_TRITON = "import triton\n\ndef solution(x, y):\n    return (x +\n"


def batch(count: int, gpu: bool) -> list[tuple[str, str, str, str]]:
    """(kind, task, source, language): a mix in fixed proportions, each source unique but a tenth repeated."""
    from kerneldojo.baselines import shipped_solutions

    honest = [(t, lang, p.read_text()) for t in ("vector_add", "relu", "softmax", "gelu")
              for lang, p in shipped_solutions(t).items() if gpu or lang in ("triton", "python")]
    vector_add = shipped_solutions("vector_add")["triton"].read_text()
    kinds = [("wrong", "vector_add", "triton", vector_add.replace(*WRONG)),
             ("no_compile", "vector_add", "triton", NO_COMPILE_TRITON),
             ("crash", "vector_add", "python", CRASH), ("hang", "vector_add", "python", HANG),
             *[("correct", *h) for h in honest] * 3]
    if gpu:
        kinds.append(("no_compile", "vector_add", "cuda", NO_COMPILE_CUDA))
    jobs = []
    for i in range(count):
        kind, task, language, source = kinds[i % len(kinds)]
        if i % 10 == 9 and jobs:  # a repeat of an earlier submission
            jobs.append(("repeat", *jobs[i // 2][1:]))
            continue
        comment = "#" if language in ("triton", "python") else "//"
        jobs.append((kind, task, f"{source}\n{comment} {uuid.uuid4().hex}\n", language))
    return jobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--devices", default="auto")
    parser.add_argument("--workers-per-gpu", type=int, default=4)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    import tempfile

    from kerneldojo.batch.pool import GPUPool, parse_devices

    gpu = parse_devices(args.devices)[0].device != "cpu"
    jobs = batch(10 if args.quick else args.count, gpu)
    kwargs = {"limits": {"run": 5, "compile": 5}} if args.quick else {}
    with tempfile.TemporaryDirectory() as cache:  # a fresh result cache: only the batch's own repeats are reused
        import os

        os.environ["KERNELDOJO_CACHE"] = cache
        with GPUPool(args.devices, workers_per_gpu=args.workers_per_gpu, coalesce=False, **kwargs) as pool:
            kinds = {}
            items = ((kind, (task, source, language)) for kind, task, source, language in jobs)
            for outcome in pool.imap_unordered(items):
                status = outcome.result.status if outcome.result else f"judge error: {outcome.error}"
                kinds.setdefault(outcome.tag, {}).setdefault(status, 0)
                kinds[outcome.tag][status] += 1
            summary, described = pool.stats.summary(), pool.describe()
    rate = summary["evaluations_per_gpu_hour"] or summary["evaluations_per_hour"]
    table = [f"{summary['evaluations']} evaluations on {described}, {args.workers_per_gpu} workers per GPU, "
             f"{summary['wall_s']:.1f} s: **{report.fmt(rate, '.0f')} evaluations per "
             f"{'GPU-hour' if summary['gpus'] else 'hour (CPU mode)'}**, {summary['reused']} reused.", "",
             "| submission kind | verdicts |", "|---|---|"]
    table += [f"| {kind} | {', '.join(f'{s} {n}' for s, n in sorted(v.items()))} |"
              for kind, v in sorted(kinds.items())]
    table += ["", "| phase | share of the evaluations' time | seconds |", "|---|---|---|"]
    table += [f"| {name} | {share:.1%} | {summary['phase_seconds'][name]:.1f} |"
              for name, share in sorted(summary["phase_share"].items(), key=lambda kv: -kv[1])]
    report.write(args.out, "batch_throughput", {"summary": summary, "verdicts_by_kind": kinds}, table)


if __name__ == "__main__":
    main()
