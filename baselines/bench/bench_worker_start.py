"""Where a spare worker's start goes: the judge's synchronous part (cgroup, plan, spawn's fork and exec), the
child's interpreter and imports (torch, kerneldojo), its confinement (`harden`), and each warm-up step
(`loop.serve`), up to the first answered request. Runs on CPU or GPU.

    python baselines/bench/bench_worker_start.py [--workers 3] [--device cpu]

Prints one line per worker and the medians (seconds). The worker's stages are timed by wrapping loop.py's
functions in the child (nothing in the judge or the worker changes).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time


def timed_serve(sock, device_spec: str, scratch: str, plan=None, started: float = 0.0) -> None:
    """loop.serve_socket with each warm-up step timed; the times go to the worker's output file."""
    entered = time.time()
    from kerneldojo.sandbox.worker import loop

    times = {"spawn_and_imports": entered - started}
    imported = time.time()

    def wrap(name, fn):
        def timed(*args, **kwargs):
            begun = time.time()
            try:
                return fn(*args, **kwargs)
            finally:
                times[name] = times.get(name, 0.0) + time.time() - begun
        return timed

    loop.harden = wrap("harden", loop.harden)
    loop.list_tasks = wrap("list_tasks", loop.list_tasks)
    loop._launch_trivial_triton_kernel = wrap("triton_warmup", loop._launch_trivial_triton_kernel)
    loop.interpreter_code = wrap("interpreter_code", loop.interpreter_code)
    session_init = loop._Session.__init__

    def ready(self, *args, **kwargs):
        times["loop_module_import"] = imported - entered
        times["ready_at"] = time.time() - started
        # The rest: the forbidden-operator watch's first use (torch._dynamo's import) and torch.empty.
        times["dynamo_warmup_and_rest"] = times["ready_at"] - sum(v for k, v in times.items() if k != "ready_at")
        print("TIMES " + json.dumps(times), flush=True)
        session_init(self, *args, **kwargs)

    loop._Session.__init__ = ready
    loop.serve_socket(sock, device_spec, scratch, plan)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    import functools

    from kerneldojo.sandbox import process
    from kerneldojo.sandbox.device import resolve_device
    from kerneldojo.sandbox.protocol import SubmissionError

    device = resolve_device(args.device)
    rows = []
    for _ in range(args.workers):
        started = time.time()
        process.serve_socket = functools.partial(timed_serve, started=started)
        worker = process._Worker(device)
        constructed = time.time() - started
        with contextlib.suppress(SubmissionError):  # no submission loaded: an error reply, once the loop runs
            worker.call("flags", (), 300)
        answered = time.time() - started
        protections = worker.protections()
        tail = worker.output_tail()
        worker.stop()
        times = json.loads(tail.split("TIMES ", 1)[1].splitlines()[0]) if "TIMES " in tail else {}
        row = {"judge_side_s": constructed, "first_reply_s": answered, **times,
               "protections": sorted(k for k, v in protections.items() if v is True)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    keys = [k for k in rows[0] if k != "protections"]
    print("medians: " + ", ".join(f"{k} {statistics.median(r.get(k, 0.0) for r in rows):.3f}" for k in keys))


if __name__ == "__main__":
    sys.exit(main())
