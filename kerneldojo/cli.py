"""The `kerneldojo` command: tasks, show, eval, lint, demo, batch, leaderboard, store, serve. It parses and
prints; the work is done by the API (`kerneldojo.evaluate`), the linter, and `kerneldojo.batch`."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from kerneldojo.adapters import cli as adapters_cli
from kerneldojo.adapters.cli import add_suite_flags, suite_of
from kerneldojo.baselines import shipped_solutions
from kerneldojo.batch.leaderboard import render_leaderboard, render_store, table
from kerneldojo.env.feedback import render_feedback
from kerneldojo.result import STATUS_MEANING, EvalResult
from kerneldojo.tasks import LANGUAGES, TaskError, broken_tasks, get_task, list_tasks
from kerneldojo.version import __version__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kerneldojo", description="GPU-kernel tasks, a judge and a leaderboard.")
    parser.add_argument("--version", action="version", version=f"kerneldojo {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("tasks", help="list the tasks")
    show = commands.add_parser("show", help="print a task's prompt, reference and starter")
    show.add_argument("task")
    show.add_argument("--language", choices=LANGUAGES)
    ev = commands.add_parser("eval", help="evaluate a submission file")
    ev.add_argument("task")
    ev.add_argument("file", type=Path)
    ev.add_argument("--language", help=f"one of {', '.join(LANGUAGES)}; detected from the source when omitted")
    ev.add_argument("--device", default="auto", help="auto (default), cpu, cuda or cuda:N")
    ev.add_argument("--isolation", default="process",  # checked against the backend table by the Judge
                    help="where the submission runs: a worker process (default), a container (the image in "
                    "KERNELDOJO_DOCKER_IMAGE, else a local one built without a registry), or this process")
    ev.add_argument("--json", action="store_true", help="print the EvalResult as JSON")
    ev.add_argument("--profile", action="store_true",
                    help="also replay the largest bench case under Nsight Compute (GPU only) and summarise it")
    add_suite_flags(ev)  # eval --kernelbench PROBLEM.py SOLUTION.py, eval --gpumode PROBLEM_DIR SOLUTION.py
    ev.add_argument("--retime", action="store_true",
                    help="evaluate and time again even if an identical submission's result is cached")
    lint = commands.add_parser("lint", help="check task definitions and that their starters and baselines pass")
    lint.add_argument("tasks", nargs="*", help="default: all")
    lint.add_argument("--device", default="cpu")
    lint.add_argument("--quick", action="store_true", help="skip running the starters and baselines")
    lint.add_argument("--repeat", type=int, default=1, metavar="N",
                      help="evaluate each starter and baseline N times on fresh seeds, to find seed-dependent failures")
    demo = commands.add_parser("demo", help="evaluate the shipped baselines and print the table")
    demo.add_argument("--device", default="auto", help="auto (every GPU, else CPU slots), cpu, cpu:N, cuda:N, 0,2")
    demo.add_argument("--task", action="append", help="only these tasks (repeatable)")
    batch = commands.add_parser("batch", help="evaluate many submissions over the GPUs into a result store")
    batch.add_argument("submissions", type=Path, help="a folder <task>/<name>.{py,cu}, or a JSONL manifest")
    batch.add_argument("solutions", type=Path, nargs="?", help="with --kernelbench/--gpumode: the solutions folder")
    add_suite_flags(batch)
    batch.add_argument("--devices", default="auto",
                       help="auto (default: every GPU, else CPU slots), all, cuda:0,cuda:2, 0,2, cpu, cpu:N")
    batch.add_argument("--out", default="results.jsonl", help="the store: a .jsonl file, a .db file (SQLite) or a "
                       "database URL (sqlite:///..., postgresql://user@host/db); reruns resume it")
    batch.add_argument("--submitter", help="who submitted, recorded with each result (shown on the leaderboard)")
    batch.add_argument("--compile-workers", type=int, help="parallel nvcc builds (default: the CPU cores)")
    batch.add_argument("--backend", choices=("local", "ray"), default="local",
                       help="local: this host's GPUs; ray: a judge actor per GPU of a Ray cluster (--devices: auto, "
                       "gpu, cpu, cpu:N)")
    batch.add_argument("--address", help="the Ray cluster (ray.init's address; default: start or join a local one)")
    board = commands.add_parser("leaderboard", help="best correct result per task and GPU, from a store")
    board.add_argument("store", help="a .jsonl file, a .db file or a database URL")
    board.add_argument("--html", type=Path, metavar="OUT.html",
                       help="also write a static HTML report with interactive plots (works offline)")
    board.add_argument("--all-versions", action="store_true",
                       help="rank every task version and judge protocol apart (default: each task's newest only)")
    store = commands.add_parser("store", help="import into or export from a result store")
    store_commands = store.add_subparsers(dest="store_command", required=True)
    store_import = store_commands.add_parser("import", help="append a store's records to another (e.g. JSONL to a DB)")
    store_import.add_argument("source", help="the store to read (.jsonl, .db or URL)")
    store_import.add_argument("dest", help="the store to append to (.jsonl, .db or URL)")
    store_export = store_commands.add_parser("export", help="write a store's records to .jsonl, .csv or .parquet")
    store_export.add_argument("store")
    store_export.add_argument("out", type=Path, help="OUT.jsonl (whole records), OUT.csv or OUT.parquet (pyarrow)")
    serve = commands.add_parser("serve", help="the judge as an HTTP service (docs/service.md)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--state-dir", type=Path, default=Path("kerneldojo-service"),
                       help="the job log, and the result store unless --store")
    serve.add_argument("--store", help="the result store: a .jsonl file, a .db file or a database URL "
                       "(default: STATE_DIR/results.jsonl)")
    serve.add_argument("--tokens", help="token file (TOML or JSON; docs/service.md); default: $KERNELDOJO_TOKENS, "
                       "else no authentication")
    serve.add_argument("--backend", choices=("local", "ray"), default="local")
    serve.add_argument("--devices", default="auto", help="as for batch")
    serve.add_argument("--address", help="the Ray cluster, with --backend ray")
    serve.add_argument("--max-request-bytes", type=int, default=1 << 20)
    args = parser.parse_args(argv)
    _show_build_progress()
    try:
        command = {"tasks": cmd_tasks, "show": cmd_show, "eval": cmd_eval, "lint": cmd_lint, "demo": cmd_demo,
                   "batch": cmd_batch, "leaderboard": cmd_leaderboard, "serve": cmd_serve, "store": cmd_store}
        return command[args.command](args)
    except (TaskError, ValueError, FileNotFoundError) as e:
        print(f"kerneldojo: error: {e}", file=sys.stderr)
        return 2


def _show_build_progress() -> None:
    """A long nvcc build says what it is building and for how long so far (graders/compile.py logs it)."""
    build_log = logging.getLogger("kerneldojo.build")
    if not build_log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("  %(message)s"))
        build_log.addHandler(handler)
        build_log.setLevel(logging.INFO)


def cmd_tasks(args) -> int:
    specs = [get_task(t).spec for t in list_tasks()]
    rows = [(s.id, str(s.level), s.title, ", ".join(s.languages), ", ".join(s.dtypes)) for s in specs]
    rows += [(task_id, "-", f"broken: {error}"[:100], "-", "-") for task_id, error in broken_tasks().items()]
    print(table(("task", "level", "title", "languages", "dtypes"), rows))
    return 0


def cmd_show(args) -> int:
    task = get_task(args.task)
    language = args.language or task.spec.languages[0]
    if not task.allows(language):
        raise ValueError(f"task {task.id!r} accepts {', '.join(task.spec.languages)}, not {language!r}")
    print(f"# {task.id}: {task.spec.title} (level {task.spec.level})\n\n{task.instructions(language)}\n")
    print(f"## reference.py\n\n{task.reference_source}\n## starter ({language})\n\n{task.starter(language)}")
    return 0


def cmd_eval(args) -> int:
    if suite := suite_of(args):
        return adapters_cli.cmd_eval(args, suite)
    task = get_task(args.task)
    if args.file.is_dir():
        raise ValueError(f"{args.file} is a folder; eval takes one submission file (a folder of submissions: "
                         f"`kerneldojo batch {args.file}`)")
    if not args.file.is_file():
        raise FileNotFoundError(f"no such file: {args.file}")
    from kerneldojo.judge import Judge

    docker = None
    if args.isolation == "docker" and not os.environ.get("KERNELDOJO_DOCKER_IMAGE"):  # the local skeleton image
        from kerneldojo.sandbox.docker_image import build_local_image, local_config

        docker = local_config(build_local_image())
    judge = Judge(args.device, isolation=args.isolation, docker=docker, profile=args.profile)
    result = judge.evaluate(task, args.file.read_text(), args.language, retime=args.retime)
    print(result.model_dump_json(indent=2) if args.json else render_feedback(result, clocks=True))
    return 0 if result.status in ("ok", "compiled") else 1


def cmd_lint(args) -> int:
    from kerneldojo.judge import Judge
    from kerneldojo.lint import lint_solutions, lint_task

    judge = None if args.quick else Judge(args.device)
    failed = 0
    for task_id in [t for t in args.tasks or list_tasks() if t not in broken_tasks()]:
        task = get_task(task_id)
        try:
            problems = lint_task(task) + ([] if judge is None else lint_solutions(task, judge, args.repeat))
        except TaskError as e:  # reference.py does not import, or lacks a function
            problems = [f"does not load: {e}"]
        print(f"{task_id}: {'ok' if not problems else ''}")
        for problem in problems:
            print(f"  - {problem}")
        failed += bool(problems)
    for task_id, error in broken_tasks().items():
        if not args.tasks or task_id in args.tasks:
            print(f"{task_id}: \n  - does not load: {error}")
            failed += 1
    return 1 if failed else 0


def cmd_demo(args) -> int:
    from kerneldojo.batch.pool import GPUPool

    for name in args.task or []:
        get_task(name)
    solutions = [(t, lang, path) for t in args.task or list_tasks() for lang, path in shipped_solutions(t).items()]
    done: dict[int, EvalResult] = {}
    with GPUPool(args.device) as pool:  # every GPU, or CPU slots: the batch path
        # Judged afresh (retime): a verdict reused from the judge's cache is never ranked, so a second demo on the
        # same machine printed an empty board.
        jobs = ((i, (task_id, path.read_text(), lang, True)) for i, (task_id, lang, path) in enumerate(solutions))
        for outcome in pool.imap_unordered(jobs):
            if outcome.error is not None:
                raise outcome.error
            task_id, language, _ = solutions[outcome.tag]
            result = outcome.result
            why = f": {_why(result)}" if result.status not in ("ok", "compiled") else ""
            print(f"  {task_id:<12} {language:<7} {result.summary()}{why}", file=sys.stderr, flush=True)
            done[outcome.tag] = result
    labels = {i: f"{solutions[i][2].parent.name}/{solutions[i][2].name}" for i in done}
    records = [{"label": labels[i], **done[i].model_dump(mode="json")} for i in sorted(done)]
    print(render_leaderboard(records))
    failed = [i for i in sorted(done) if done[i].status not in ("ok", "compiled")]
    for i in failed:  # the table shows each task's best; a shipped solution that failed says why here
        print(f"{labels[i]}: {done[i].status}: {_why(done[i])}")
    return 1 if failed else 0


def _why(result: EvalResult) -> str:
    """The first line of a result's first message: why it is not ok."""
    lines = next(iter(result.messages), "").strip().splitlines()
    return lines[0][:160] if lines else STATUS_MEANING[result.status]


def cmd_batch(args) -> int:
    if suite := suite_of(args):
        return adapters_cli.cmd_batch(args, suite)
    from kerneldojo.batch import load_submissions, run_batch
    from kerneldojo.batch.pool import GPUPool, parse_devices
    from kerneldojo.batch.progress import default_progress

    if args.backend == "ray":
        from kerneldojo.batch.ray_pool import RayPool

        subs = load_submissions(args.submissions)
        pool = RayPool(args.devices, address=args.address, compile_workers=args.compile_workers)
    else:
        parse_devices(args.devices)  # a bad device list fails before anything is read
        subs = load_submissions(args.submissions)
        pool = GPUPool(args.devices, compile_workers=args.compile_workers)
    with pool:
        print(f"kerneldojo: {len(subs)} submissions on {pool.describe()} -> {args.out}", file=sys.stderr)
        summary = run_batch(subs, args.out, pool, progress=default_progress(), submitter=args.submitter)
        if hasattr(pool, "report"):  # throughput and where the time went (GPUPool)
            print(pool.report(), file=sys.stderr)
    print(f"kerneldojo: {summary.evaluated} evaluated ({summary.reused} reused from the result cache), "
          f"{summary.skipped} already in {args.out}, "
          f"{summary.failed} judge errors", file=sys.stderr)  # fmt: skip
    print(render_store(args.out))
    return 1 if summary.failed else 0


def cmd_leaderboard(args) -> int:
    print(render_store(args.store, args.all_versions))
    if args.html:
        from kerneldojo.batch.leaderboard import open_existing
        from kerneldojo.batch.report import render_html

        with open_existing(args.store) as store:
            args.html.write_text(render_html(store.records(), all_versions=args.all_versions))
        print(f"kerneldojo: wrote {args.html}", file=sys.stderr)
    return 0


def cmd_store(args) -> int:
    from kerneldojo.batch.leaderboard import open_existing
    from kerneldojo.batch.store import ResultStore, copy_records, export_records

    with open_existing(args.store if args.store_command == "export" else args.source) as source:
        if args.store_command == "export":
            n = export_records(source.records(), args.out)
            print(f"kerneldojo: wrote {n} records to {args.out}", file=sys.stderr)
        else:
            with ResultStore(args.dest) as dest:
                copied, skipped = copy_records(source, dest)
            print(f"kerneldojo: imported {copied} records into {dest}, {skipped} were there", file=sys.stderr)
        if source.unreadable:
            print(f"kerneldojo: {source.unreadable} unreadable line(s) of {source} skipped", file=sys.stderr)
    return 0


def cmd_serve(args) -> int:
    from kerneldojo.service import ServiceConfig, load_tokens
    from kerneldojo.service.config import tokens_from_env

    try:
        from kerneldojo.service import serve
    except ImportError:
        raise ValueError("the service needs FastAPI and uvicorn: pip install 'kerneldojo[serve]'") from None
    tokens = load_tokens(args.tokens) if args.tokens else tokens_from_env()
    if not tokens:
        print("kerneldojo: no tokens configured: every caller is 'anonymous' (see docs/service.md)", file=sys.stderr)
    serve(ServiceConfig(state_dir=args.state_dir, store=args.store, backend=args.backend, devices=args.devices,
                        ray_address=args.address, tokens=tokens, max_request_bytes=args.max_request_bytes),
          host=args.host, port=args.port)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
