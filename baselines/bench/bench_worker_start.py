"""Where a spare worker's start goes, seen from the judge: its synchronous part (cgroup, plan, spawn's fork and exec),
then the child's interpreter, imports and confinement (until its protections report arrives), its warm-up (the task
library, the watch's first use, a Triton launch, on a GPU the CUDA context and the harness's kernels: until its
`READY`), and the first request's round trip. Runs on CPU or GPU. Workers are forked from the worker template unless
KERNELDOJO_WORKER_TEMPLATE=0 (then each is spawned, a fresh interpreter); the template's own start comes first.

    python baselines/bench/bench_worker_start.py [--workers 3] [--device cpu] [--together]

Prints one line per worker and the medians (seconds). `--together` starts them all at once, as a judge tops up its
spares. (It used to time the child's steps by wrapping loop.py's functions in the child; an allowlisted worker root
cannot import this script, so the stages are now the judge's own observations.)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--together", action="store_true", help="start every worker before waiting for any")
    args = parser.parse_args()

    from kerneldojo.sandbox import process
    from kerneldojo.sandbox.device import resolve_device
    from kerneldojo.sandbox.protocol import SubmissionError

    device = resolve_device(args.device)
    os.environ["KERNELDOJO_WORKER_STAGES"] = "1"  # each worker stamps its stages (sandbox/worker/confine.py `stage`)
    if process.TEMPLATE:  # workers are forked from it (`sandbox/worker/template.py`): its own start, once per judge
        started = time.time()
        process._spawner.submit(process._template).result().ready.wait(300)
        print(json.dumps({"template_ready_s": round(time.time() - started, 3)}), flush=True)
    else:
        print(json.dumps({"template": "off (KERNELDOJO_WORKER_TEMPLATE=0): each worker a fresh interpreter"}))

    def start() -> tuple[float, process._Worker, float]:
        started = time.time()
        worker = process._Worker(device)
        return started, worker, time.time() - started

    def observe(started: float, worker: process._Worker, spawned: float) -> dict:
        protections = worker.protections(timeout=300)
        confined = time.time() - started
        stages = protections.get("stages") or {}  # the worker's own stamps, for this bench only
        imported = stages["imported"] - started if "imported" in stages else None
        worker.replies.ready.wait(300)
        ready = time.time() - started
        said = worker.output_tail().partition("kerneldojo worker stages: ")[2]  # the warm-up's stamps (loop.py)
        warmup = json.loads(said.splitlines()[0]) if said else {}
        with contextlib.suppress(SubmissionError):  # no submission loaded: an error reply
            worker.call("flags", (), 300)
        answered = time.time() - started
        worker.stop()
        return {"spawn_s": spawned, "interpreter_imports_confine_s": confined - spawned,
                "interpreter_imports_s": None if imported is None else imported - spawned,
                "confine_s": None if imported is None else confined - imported, "warmup_s": ready - confined,
                "first_request_s": answered - ready, "ready_at_s": ready,
                "protections": sorted(k for k, v in protections.items() if v is True),
                "confine_stages": {k: round(v - stages["enter"], 4) for k, v in stages.items() if k != "imported"},
                "warmup_stages": warmup}

    rows = []
    if args.together:
        rows = [observe(*s) for s in [start() for _ in range(args.workers)]]
    else:
        rows = [observe(*start()) for _ in range(args.workers)]
    for row in rows:
        print(json.dumps(row), flush=True)
    keys = [k for k in rows[0] if isinstance(rows[0][k], float)]
    print("medians: " + ", ".join(f"{k} {statistics.median(r[k] for r in rows):.3f}" for k in keys))


if __name__ == "__main__":
    sys.exit(main())
