"""Side by side on one GPU and the same kernels: kerneldojo's step (sandboxed, full protocol), an in-process
evaluation following KernelBench's published protocol, and Triton's `do_bench`; each one's kernel time and
wall time.

KernelBench (Ouyang et al., 2025, "KernelBench: Can LLMs Write Efficient GPU Kernels?", arXiv:2502.10517)
evaluates in the caller's process: 5 correctness trials on fresh random inputs compared with
torch.allclose (atol = rtol = 1e-2), then 100 timed trials, each between two CUDA events with the device
synchronized after it, reporting the mean. The function below is written here from that description.

    python baselines/bench/bench_side_by_side.py OUT_DIR [--quick]

Writes OUT_DIR/side_by_side.json and .md. Without a GPU (--quick) only kerneldojo's CPU-mode step and the
correctness trials (Triton's interpreter, small shapes) run; nothing is timed.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import report

KERNELS = (("vector_add", "triton"), ("softmax", "triton"), ("matmul", "triton"))


def load(source: str):
    """The submission as a module of this process (no sandbox: this is the unsandboxed anchor)."""
    path = Path(tempfile.mkdtemp()) / f"sub_{uuid.uuid4().hex}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.solution


def first_two_calls(task, fn, device, case) -> tuple[float, float]:
    """Seconds of a fresh submission's first call at `case` (its JIT, autotuning) and of its second, synchronized."""
    import torch

    inputs, scalars = task.reference.make_inputs(case.shape, 0, device.torch_device), task.scalars(case.shape)
    seconds = []
    for _ in range(2):
        started = time.perf_counter()
        fn(*inputs, *scalars)
        if device.mode == "gpu":
            torch.cuda.synchronize(device.torch_device)
        seconds.append(time.perf_counter() - started)
    return seconds[0], seconds[1]


def kernelbench_style(task, source: str, device, shape: dict, timed: bool) -> dict:
    import torch

    started = time.perf_counter()
    fn = load(source)
    scalars = task.scalars(shape)
    correct = True
    for trial in range(5):
        inputs = task.reference.make_inputs(shape, 1000 + trial, device)
        expected = task.expected(*inputs, shape=shape)
        got = fn(*inputs, *scalars)
        got = got if isinstance(got, tuple) else (got,)
        correct &= all(torch.allclose(g.float(), e.float(), atol=1e-2, rtol=1e-2) for g, e in zip(got, expected))
    kernel_ms = None
    if timed:
        inputs = task.reference.make_inputs(shape, 0, device)
        fn(*inputs, *scalars)
        torch.cuda.synchronize(device)
        times = []
        for _ in range(100):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(*inputs, *scalars)
            end.record()
            torch.cuda.synchronize(device)
            times.append(start.elapsed_time(end))
        kernel_ms = statistics.fmean(times)
    return {"correct": bool(correct), "kernel_ms": kernel_ms, "wall_s": time.perf_counter() - started}


def do_bench(task, source: str, device, shape: dict) -> dict:
    from triton.testing import do_bench as triton_do_bench

    started = time.perf_counter()
    fn = load(source)
    inputs, scalars = task.reference.make_inputs(shape, 0, device), task.scalars(shape)
    kernel_ms = triton_do_bench(lambda: fn(*inputs, *scalars), return_mode="median")
    return {"kernel_ms": kernel_ms, "wall_s": time.perf_counter() - started}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--quick", action="store_true", help="vector_add only")
    parser.add_argument("--evidence", choices=["always", "sampled", "off"], default="sampled",
                        help="kerneldojo's evidence pass: the gym env's default (sampled) unless said")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():  # before triton is imported: its interpreter runs the kernels on the CPU
        os.environ["TRITON_INTERPRET"] = "1"
    from kerneldojo.baselines import shipped_solutions
    from kerneldojo.judge import Judge
    from kerneldojo.tasks import get_task

    judge = Judge(args.device, result_cache=None, evidence=args.evidence)
    gpu = judge.device.mode == "gpu"
    rows = []
    for task_id, language in KERNELS[:1] if args.quick else KERNELS:
        task, source = get_task(task_id), shipped_solutions(task_id)[language].read_text()
        case = task.cases("bench" if gpu else "small")[-1]
        judge.evaluate(task, source + "\n# warm-up\n", language)  # reference timings cached, as in a long run
        started = time.perf_counter()
        result = judge.evaluate(task, f"{source}\n# {uuid.uuid4().hex}\n", language)
        step_s = time.perf_counter() - started
        ours = next((t.submission.median_ms for t in result.timings if t.case == str(case)), None)
        row = {"task": task_id, "language": language, "case": str(case), "kerneldojo_status": result.status,
               "kerneldojo_kernel_ms": ours, "kerneldojo_wall_s": step_s, "kerneldojo_phases": result.phases,
               "kerneldojo_evidence_drawn": result.evidence is not None}
        kb = kernelbench_style(task, source, judge.device.torch_device, case.shape, gpu)
        row |= {"kernelbench_correct": kb["correct"], "kernelbench_kernel_ms": kb["kernel_ms"],
                "kernelbench_wall_s": kb["wall_s"]}
        if gpu:
            db = do_bench(task, source, judge.device.torch_device, case.shape)
            row |= {"do_bench_kernel_ms": db["kernel_ms"], "do_bench_wall_s": db["wall_s"]}
        rows.append(row)
        print(row, file=sys.stderr, flush=True)
    table = ["kernel time: kerneldojo the median (cold L2, host gate), KernelBench-style the mean of 100 CUDA-event "
             "trials (warm L2), do_bench the median. Wall: one evaluation, end to end (kerneldojo's evidence pass: "
             f"{args.evidence}; a * marks a step that drew it).", "",
             "| task | case | kerneldojo ms | KernelBench-style ms | do_bench ms | kerneldojo wall s | "
             "KernelBench-style wall s | do_bench wall s |", "|---|---|---|---|---|---|---|---|"]
    table += [f"| {r['task']} ({r['language']}) | {r['case']} | {report.fmt(r['kerneldojo_kernel_ms'], '.4g')} | "
              f"{report.fmt(r['kernelbench_kernel_ms'], '.4g')} | {report.fmt(r.get('do_bench_kernel_ms'), '.4g')} | "
              f"{r['kerneldojo_wall_s']:.2f}{'*' if r['kerneldojo_evidence_drawn'] else ''} | "
              f"{r['kernelbench_wall_s']:.2f} | {report.fmt(r.get('do_bench_wall_s'))} |"
              for r in rows]
    report.write(args.out, "side_by_side", {"device": judge.device.name, "rows": rows}, table)


if __name__ == "__main__":
    main()
