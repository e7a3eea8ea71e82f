"""Batch throughput: a mixed batch of level-1 submissions through `GPUPool`; evaluations per GPU-hour, the verdicts
by kind, p50 seconds per status and each phase's share.

    python baselines/bench/bench_batch_throughput.py OUT_DIR [--count 300] [--workers-per-gpu 4] [--budget-s 240]
        [--tasks vector_add,relu,softmax,gelu] [--no-compiled-reference] [--evidence always|sampled] [--warm] [--quick]

The mix, in a fixed cycle: each shipped baseline of `--tasks` (Triton, CUDA on a GPU) three times (correct),
and spread among them one each of: wrong (vector_add Triton leaving its last element unwritten), non-compiling (a Triton
syntax error; on a GPU a CUDA one too), crashing (`os._exit` in the call), hanging (a Triton kernel that spins
forever on the device: its launch returns, the synchronize never does). Every source is unique, except that every
tenth submission repeats an earlier one, as RL batches repeat themselves (reused from the result cache).
--budget-s: no new work is submitted once the budget is within --drain-s of its end; what finished is reported.
--quick: 16 submissions on CPU slots, a 5 s run limit (and 5 s more for the first run of a shape).
Writes OUT_DIR/batch_throughput.json and .md.
"""

from __future__ import annotations

import _thread
import argparse
import os
import resource
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import report

WRONG = ("mask = offs < n", "mask = offs < n - 1")  # in the shipped vector_add Triton: the last element unwritten
CRASH = "import os\n\n\ndef solution(x, y):\n    os._exit(3)\n"
HANG = '''import torch
import triton
import triton.language as tl


@triton.jit
def spin(x_ptr, out_ptr):
    i = 0
    while tl.load(x_ptr, volatile=True) == tl.load(x_ptr, volatile=True):  # a finite input: forever
        i += 1
    tl.store(out_ptr, i)


def solution(x, y):
    out = torch.empty_like(x)
    spin[(1,)](x, out)
    return out
'''
NO_COMPILE_CUDA = 'extern "C" void solution(const float* x, const float* y, float* out, int n) { oops }\n'
NO_COMPILE_TRITON = "import triton\n\ndef solution(x, y):\n    return (x +\n"


def batch(count: int, gpu: bool, tasks: list[str]) -> list[tuple[str, str, str, str]]:
    """(kind, task, source, language): the mix of the module's docstring, each source unique but a tenth repeated."""
    from kerneldojo.baselines import shipped_solutions

    honest = [(t, lang, p.read_text()) for t in tasks
              for lang, p in shipped_solutions(t).items() if gpu or lang in ("triton", "python")]
    vector_add = shipped_solutions("vector_add")["triton"].read_text()
    failing = [("wrong", "vector_add", "triton", vector_add.replace(*WRONG)),
               ("no_compile", "vector_add", "triton", NO_COMPILE_TRITON),
               ("crash", "vector_add", "python", CRASH), ("hang", "vector_add", "triton", HANG)]
    if gpu:
        failing.append(("no_compile", "vector_add", "cuda", NO_COMPILE_CUDA))
    correct = [("correct", *h) for h in honest] * 3
    every, kinds = max(1, len(correct) // len(failing)), []  # the failing ones spread through the cycle
    for i, entry in enumerate(correct):
        kinds.append(entry)
        if (i + 1) % every == 0 and failing:
            kinds.append(failing.pop(0))
    kinds += failing
    jobs = []
    for i in range(count):
        kind, task, language, source = kinds[i % len(kinds)]
        if i % 10 == 9 and jobs:  # a repeat of an earlier submission
            jobs.append(("repeat", *jobs[i // 2][1:]))
            continue
        comment = "#" if language in ("triton", "python") else "//"
        jobs.append((kind, task, f"{source}\n{comment} {uuid.uuid4().hex}\n", language))
    return jobs


def cpu_seconds() -> dict[str, float]:
    """User + system CPU seconds so far of this process (the judge's, all its threads) and of the whole host (from
    /proc/stat: the workers are the worker template's children, whose reaped time never reaches this process's
    RUSAGE_CHILDREN; on a machine lent to this run alone, the rest is noise)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    busy = sum(fields) - fields[3] - fields[4]  # all but idle and iowait
    return {"judge": sum(resource.getrusage(resource.RUSAGE_SELF)[:2]), "host": busy / os.sysconf("SC_CLK_TCK")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--devices", default="auto")
    parser.add_argument("--workers-per-gpu", type=int, default=4)
    parser.add_argument("--tasks", default="vector_add,relu,softmax,gelu", help="the correct submissions' tasks")
    parser.add_argument("--budget-s", type=float, default=None, help="wall-clock seconds for the batch")
    parser.add_argument("--drain-s", type=float, default=30.0, help="stop submitting this long before the budget")
    parser.add_argument("--no-compiled-reference", action="store_true", help="time the eager reference only")
    parser.add_argument("--evidence", choices=["always", "sampled"], default="always",
                        help="the evidence pass on every submission (batch and leaderboard runs), or on one in "
                             "EVIDENCE_ONE_IN with its fine (the gym env's default, an RL trainer's loop)")
    parser.add_argument("--warm", action="store_true",
                        help="time every task's references before the clock starts: the steady state of a batch on a "
                             "machine that has judged these tasks before (reference times are kept on disk)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    from kerneldojo.batch.pool import GPUPool, parse_devices

    gpu = parse_devices(args.devices)[0].device != "cpu"
    jobs = batch(16 if args.quick else args.count, gpu, args.tasks.split(","))
    kwargs = {"limits": {"run": 5, "compile": 5}} if args.quick else {}
    kwargs["time_compiled_reference"] = not args.no_compiled_reference
    kwargs["evidence"] = args.evidence
    if args.warm:  # into the reference cache every slot's judge reads when it starts
        from kerneldojo.judge import Judge

        warming = time.perf_counter()
        judge = Judge(parse_devices(args.devices)[0].device, time_compiled_reference=not args.no_compiled_reference)
        for task in {task for _, task, _, _ in jobs}:
            judge.time_references(task)
        print(f"references timed or read in {time.perf_counter() - warming:.1f} s", file=sys.stderr, flush=True)
    started, cpu_started = time.perf_counter(), cpu_seconds()
    stop_at = started + args.budget_s - args.drain_s if args.budget_s else float("inf")

    def items():
        for kind, task, source, language in jobs:
            if time.perf_counter() >= stop_at:
                return
            yield kind, (task, source, language)

    # A fresh result cache (only the batch's own repeats are reused); reference timings stay where they are.
    with tempfile.TemporaryDirectory() as results:
        kwargs["result_cache"] = results
        with GPUPool(args.devices, workers_per_gpu=args.workers_per_gpu, coalesce=False, **kwargs) as pool:
            kinds, seconds, failures = {}, {}, {}
            # At the budget's end what finished is reported, whatever is still in flight (a hang near the end ran
            # past its limits' sum and the whole run was lost to the caller's timeout: 2026-11-28 13:40).
            ends = threading.Timer(args.budget_s, _thread.interrupt_main) if args.budget_s else None
            if ends is not None:
                ends.daemon = True
                ends.start()
            try:
                for outcome in pool.imap_unordered(items(), window=len(pool) + 2):
                    status = outcome.result.status if outcome.result else "judge_error"
                    kinds.setdefault(outcome.tag, {}).setdefault(status, 0)
                    kinds[outcome.tag][status] += 1
                    if outcome.result:
                        seconds.setdefault(status, []).append(outcome.result.wall_s)
                        if outcome.tag not in failures and outcome.tag in ("correct", "hang") and status not in (
                                "ok", "timeout"):  # fmt: skip
                            failures[outcome.tag] = " | ".join(outcome.result.messages)[:2000]
                    else:
                        failures.setdefault("judge_error", str(outcome.error)[:2000])
            except KeyboardInterrupt:
                print("the budget ended with evaluations in flight: what finished is reported", file=sys.stderr)
            if ends is not None:
                ends.cancel()
            summary, described = pool.stats.summary(), pool.describe()
            wall = time.perf_counter() - started
            cpu = {who: round((after - before) / max(1, summary["evaluations"]), 2)
                   for (who, after), before in zip(cpu_seconds().items(), cpu_started.values())}
            _report(args, jobs, kinds, seconds, failures, summary, described, wall, cpu)


def _report(args, jobs, kinds, seconds, failures, summary, described, wall, cpu) -> None:
    from kerneldojo.batch.pool import cpu_cores

    summary["cpu_s_per_evaluation"] = cpu
    submitted = sum(n for v in kinds.values() for n in v.values())
    rate = summary["evaluations_per_gpu_hour"] or summary["evaluations_per_hour"]
    table = [f"{summary['evaluations']} evaluations of {len(jobs)} planned ({submitted} submitted before the budget) "
             f"on {described}, {args.workers_per_gpu} workers per GPU, evidence {args.evidence}, "
             f"{summary['wall_s']:.1f} s "
             f"({wall:.1f} s with set-up): **{report.fmt(rate, '.0f')} evaluations per "
             f"{'GPU-hour' if summary['gpus'] else 'hour (CPU mode)'}**, {summary['reused']} reused; CPU seconds "
             f"per evaluation: the judge's process {cpu['judge']}, the whole host {cpu['host']} "
             f"({cpu_cores()} cores).", "",
             "| submission kind | verdicts |", "|---|---|"]
    table += [f"| {kind} | {', '.join(f'{s} {n}' for s, n in sorted(v.items()))} |"
              for kind, v in sorted(kinds.items())]
    table += ["", "| status | evaluations | p50 (s) | max (s) |", "|---|---|---|---|"]
    table += [f"| {status} | {len(s)} | {statistics.median(s):.2f} | {max(s):.2f} |"
              for status, s in sorted(seconds.items())]
    table += ["", "| phase | share of the evaluations' time | seconds |", "|---|---|---|"]
    table += [f"| {name} | {share:.1%} | {summary['phase_seconds'][name]:.1f} |"
              for name, share in sorted(summary["phase_share"].items(), key=lambda kv: -kv[1])]
    table += [f"\nfirst unexpected verdict of {kind}: {text}" for kind, text in failures.items()]
    report.write(args.out, "batch_throughput", {"summary": summary, "verdicts_by_kind": kinds, "seconds": seconds,
                                                "failures": failures, "wall_s": wall}, table)
    print("\n".join(table))


if __name__ == "__main__":
    main()
