"""Step latency: one judge evaluating a new source every step (a unique comment appended, as RL rollouts
are), full protocol; p50/p90 of the steps after the first and the mean phase breakdown (`EvalResult.phases`)
per task and language. Also the floor under any CUDA step: nvcc on an empty `extern "C"` file.

    python baselines/bench/bench_step_latency.py OUT_DIR [--steps 10] [--device auto] [--quick]
        [--rows vector_add:triton,vector_add:cuda,flash_attention:triton] [--budget-s 180] [--no-compiled-reference]
        [--evidence always|sampled|off]

The judge's own overhead (issue 14: at most 5 s) is the warm p50 less what the submission costs by itself:
its compile phase (nvcc, for CUDA) and, for Triton, its own JIT and autotuning and its calls, measured apart in a
fresh process (`own_work`: a new Triton cache, the task's test and bench shapes called once each as the judge's
check calls them, then called again; first minus second is JIT and autotuning, the second call times the judge's
number of calls per case is the kernels' own time).

Writes OUT_DIR/step_latency.json and .md. --quick: vector_add Triton only, 3 steps (runs on CPU). --rows: these
rows only (default: the L1 rows below and every shipped level-3 baseline). --budget-s: each row gets an equal share
of the wall-clock budget and stops taking steps when the next would likely pass it (2 steps at least, for a warm
one). --no-compiled-reference: the speedup is against eager only, so a first step does not torch.compile the
reference (the warm steps do the same work either way: reference timings are cached after the first).
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
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import report

ROWS = (("vector_add", "triton"), ("vector_add", "cuda"), ("softmax", "triton"), ("softmax", "cuda"),
        ("matmul", "triton"))


def unique(source: str, language: str) -> str:
    return f"{source}\n{'#' if language in ('triton', 'python') else '//'} step {uuid.uuid4().hex}\n"


def measure(judge, task_id: str, language: str, source: str, steps: int, deadline: float = float("inf")) -> dict:
    seconds, phases, statuses, kernel_ms, failure, evidence = [], [], [], None, None, []
    for step in range(steps):
        if step >= 2 and time.perf_counter() + seconds[-1] > deadline:  # the budget's share of this row is spent
            break
        started = time.perf_counter()
        result = judge.evaluate(task_id, unique(source, language), language, retime=True)
        seconds.append(time.perf_counter() - started)
        phases.append(result.phases)
        if result.evidence is not None:
            evidence.append({"armed": result.evidence.armed, **result.evidence.seconds})
        statuses.append(result.status)
        if result.status not in ("ok", "compiled") and failure is None:
            failure = result.messages[-1][:2000] if result.messages else result.status
        if result.timings:
            kernel_ms = [t.submission.median_ms for t in result.timings]
    steps = len(seconds)
    warm, warm_phases = (seconds[1:], phases[1:]) if steps > 1 else (seconds, phases)
    names = sorted({n for p in warm_phases for n in p})
    return {
        "task": task_id, "language": language, "steps": steps, "statuses": sorted(set(statuses)),
        "first_s": seconds[0], "p50_s": report.percentile(warm, 50), "p90_s": report.percentile(warm, 90),
        "seconds": seconds, "phases_mean_s": {n: statistics.fmean(p.get(n, 0.0) for p in warm_phases) for n in names},
        "kernel_ms": kernel_ms, "failure": failure, "evidence_per_step": evidence,
    }  # fmt: skip


def own_work(task_id: str, source: str, seeds: int, gpu: bool) -> dict:
    """The submission by itself, no judge, in a fresh process with an empty Triton cache: {"jit_s", "calls_s"}."""
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "source.py").write_text(source)
        env = {**os.environ, "TRITON_CACHE_DIR": str(Path(tmp, "triton-cache")),
               **({} if gpu else {"TRITON_INTERPRET": "1"})}
        done = subprocess.run([sys.executable, __file__, "--own-work", task_id, str(Path(tmp, "source.py")),
                               str(seeds)], env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"own_work: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _own_work_here(task_id: str, source_path: str, seeds: int) -> None:
    from bench_side_by_side import first_two_calls, load

    from kerneldojo.sandbox.device import resolve_device
    from kerneldojo.sandbox.worker.loop import _launch_trivial_triton_kernel
    from kerneldojo.tasks import get_task

    task, device = get_task(task_id), resolve_device("auto")
    # What a worker's warm-up does before any submission (the CUDA context, Triton's launcher built in its cache)
    _launch_trivial_triton_kernel(str(device.torch_device) if device.mode == "gpu" else "cpu")
    fn = load(Path(source_path).read_text())
    jit = calls = 0.0
    kinds = (("small", seeds + 1),) if device.mode == "cpu" else (("test", seeds + 1), ("bench", 1))
    for kind, calls_per_case in kinds:
        for case in task.cases(kind):
            first, second = first_two_calls(task, fn, device, case)
            jit += max(0.0, first - second)
            calls += second * calls_per_case
    print(json.dumps({"jit_s": jit, "calls_s": calls}))


def nvcc_floor(arch: str, repeats: int = 3) -> float | None:
    """Median seconds of nvcc building an empty extern "C" function with the judge's flags."""
    from kerneldojo.graders.compile import EXPORT_FLAGS, EXPORTS_MAP, NVCC_FLAGS, NVCC_INCLUDES
    from kerneldojo.sandbox.device import cuda_tool

    nvcc = cuda_tool("nvcc")
    if nvcc is None:
        return None
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "empty.cu").write_text('extern "C" void solution() {}\n')
        Path(tmp, "exports.map").write_text(EXPORTS_MAP)
        for _ in range(repeats):
            started = time.perf_counter()
            subprocess.run([nvcc, *NVCC_FLAGS, *EXPORT_FLAGS, f"-gencode=arch=compute_{arch},code=sm_{arch}",
                            *NVCC_INCLUDES, "empty.cu", "-o", "empty.so"], cwd=tmp, check=True, capture_output=True)
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    if sys.argv[1:2] == ["--own-work"]:
        return _own_work_here(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="folder for step_latency.json and .md")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--quick", action="store_true", help="vector_add Triton only, 3 steps")
    parser.add_argument("--rows", help="task:language pairs, comma-separated (default: all rows)")
    parser.add_argument("--budget-s", type=float, default=None, help="wall-clock seconds for all rows together")
    parser.add_argument("--no-compiled-reference", action="store_true", help="time the eager reference only")
    parser.add_argument("--evidence", choices=["always", "sampled", "off"], default="sampled",
                        help="the evidence pass on every step (the Judge's default), on one in EVIDENCE_ONE_IN (the "
                             "gym env's default, what an RL trainer's step costs) or never")
    args = parser.parse_args()
    started = time.perf_counter()
    from kerneldojo.baselines import shipped_solutions
    from kerneldojo.judge import Judge
    from kerneldojo.tasks import get_task, list_tasks

    judge = Judge(args.device, result_cache=None, time_compiled_reference=not args.no_compiled_reference,
                  evidence=args.evidence)
    gpu = judge.device.mode == "gpu"
    rows = [("vector_add", "triton")] if args.quick else list(ROWS)
    if args.rows:
        rows = [tuple(row.split(":", 1)) for row in args.rows.split(",")]
    elif not args.quick:  # the shipped level-3 baselines
        rows += [(t, lang) for t in list_tasks() if get_task(t).spec.level == 3 for lang in shipped_solutions(t)]
    steps = 3 if args.quick else args.steps
    results = []
    for i, (task_id, language) in enumerate(rows):
        solutions = shipped_solutions(task_id)
        if language not in solutions or (not gpu and language not in ("triton", "python")):
            continue  # CPU mode runs only Triton
        deadline = started + args.budget_s * (i + 1) / len(rows) if args.budget_s else float("inf")
        try:
            source = solutions[language].read_text()
            results.append(measure(judge, task_id, language, source, steps, deadline))
            row = results[-1]
            none = {"jit_s": 0.0, "calls_s": 0.0}
            own = own_work(task_id, source, judge.seeds, gpu) if language == "triton" else none
            row["own_work_s"] = own
            row["judge_overhead_s"] = (row["p50_s"] - row["phases_mean_s"].get("compile", 0.0) - own["jit_s"]
                                       - own["calls_s"])
        except Exception as e:  # one row failing (a task this machine cannot run) leaves the others
            results.append({"task": task_id, "language": language, "error": f"{type(e).__name__}: {e}"})
        print(results[-1], file=sys.stderr, flush=True)
        # a run cut by its time limit keeps the rows it finished (the table is written only at the end)
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "step_latency.partial.json").write_text(json.dumps({"rows": results}, indent=1, default=str))
    floor = nvcc_floor(judge.device.arch)
    phases = sorted({n for r in results for n in r.get("phases_mean_s", {})})
    table = [f"nvcc on an empty extern \"C\" file: {report.fmt(floor)} s. Evidence pass: {args.evidence}. Steps per "
             f"row: up to {steps} (p50/p90 exclude the first); phases: mean seconds of the steps after the first.", "",
             "| task | language | status | first (s) | p50 (s) | p90 (s) | " + " | ".join(phases)
             + " | own JIT (s) | own calls (s) | judge overhead (s) | kernel (ms) |",
             "|---|---|---|---|---|---|" + "---|" * len(phases) + "---|---|---|---|"]
    for r in results:
        if "error" in r or "own_work_s" not in r:
            table.append(f"| {r['task']} | {r['language']} | {r.get('error', '')[:80]} |")
            continue
        kernel = ", ".join(f"{k:.4g}" for k in r["kernel_ms"]) if r["kernel_ms"] else "-"
        table.append(f"| {r['task']} | {r['language']} ({r['steps']} steps) | {','.join(r['statuses'])} | "
                     f"{r['first_s']:.2f} | {r['p50_s']:.2f} | {r['p90_s']:.2f} | "
                     + " | ".join(report.fmt(r["phases_mean_s"].get(n)) for n in phases)
                     + f" | {report.fmt(r['own_work_s']['jit_s'])} | {report.fmt(r['own_work_s']['calls_s'])} | "
                     f"{report.fmt(r['judge_overhead_s'])} | {kernel} |")
    report.write(args.out, "step_latency", {"device": judge.device.name, "nvcc_empty_s": floor, "rows": results},
                 table)


if __name__ == "__main__":
    main()
