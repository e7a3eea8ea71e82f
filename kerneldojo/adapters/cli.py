"""`kerneldojo eval|batch --kernelbench|--gpumode ...`: the suites' problems from the user's checkout."""

from __future__ import annotations

from pathlib import Path

SUITES = ("kernelbench", "gpumode")


def suite_of(args) -> str | None:
    return next((s for s in SUITES if getattr(args, s, False)), None)


def add_suite_flags(parser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--kernelbench", action="store_true",
                       help="the first argument is a KernelBench problem file (batch: a level folder), the solution "
                       "defines ModelNew")
    group.add_argument("--gpumode", action="store_true",
                       help="the first argument is a GPU MODE problem folder (batch: a folder of them), the solution "
                       "defines custom_kernel(data)")


def _module(suite: str):
    from kerneldojo.adapters import gpumode, kernelbench

    return {"kernelbench": kernelbench, "gpumode": gpumode}[suite]


def cmd_eval(args, suite: str) -> int:
    from kerneldojo.env.feedback import render_feedback
    from kerneldojo.judge import Judge

    problem_path, solution = Path(args.task), args.file
    if not solution.is_file():
        raise FileNotFoundError(f"no such solution file: {solution}")
    problem = _module(suite).load(problem_path)
    result = problem.evaluate(solution.read_text(), Judge(args.device, isolation=args.isolation))
    print(result.model_dump_json(indent=2) if args.json else render_feedback(result))
    return 0 if result.status in ("ok", "compiled", "skipped") else 1


def cmd_batch(args, suite: str) -> int:
    from kerneldojo.judge import Judge

    if args.solutions is None or not args.solutions.is_dir():
        raise FileNotFoundError(f"batch --{suite} PROBLEMS_DIR SOLUTIONS_DIR: give the folder of solutions")
    device = "cpu" if args.devices in ("cpu", "auto") and not _has_gpu() else args.devices.split(",")[0]
    outcome = _module(suite).evaluate_folder(args.submissions, args.solutions, Judge(device))
    print(outcome.render())
    return 0


def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()
