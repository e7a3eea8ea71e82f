"""Load on a served judge (CPU mode, loopback): N requests from C concurrent clients, every answer counted, and
the service's RSS growth. Not run in CI. Needs the serve extra and psutil.

    python baselines/bench/bench_service.py --requests 500 --clients 50

The requests mix what a trainer sends: a few distinct submissions (each judged once, then its verdict
reused), bad requests (a language the task does not take: 422), task reads and job polls.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
import submissions as subs
from served import kill_process, serve_process, wait_healthy

SOURCES = [subs.VECTOR_ADD_TRITON, subs.VECTOR_ADD_OFF_BY_ONE, subs.VECTOR_ADD_SYNTAX_ERROR, subs.VECTOR_ADD_RAISES]


def tree_rss(pid: int) -> tuple[int, int]:
    """(the service process's RSS, with its children's) in bytes."""
    root = psutil.Process(pid)
    own = root.memory_info().rss
    return own, own + sum(c.memory_info().rss for c in root.children(recursive=True) if c.is_running())


async def load(url: str, requests: int, clients: int) -> tuple[collections.Counter, list[float]]:
    codes: collections.Counter = collections.Counter()
    latencies: list[float] = []
    todo = iter(range(requests))

    async def client(http: httpx.AsyncClient) -> None:
        for i in todo:
            kind = i % 5
            started = time.perf_counter()
            try:
                if kind == 3:
                    response = await http.get("/tasks/vector_add")
                elif kind == 4:
                    response = await http.post("/evaluate", json={"task": "vector_add", "source": "x",
                                                                  "language": "cobol"})  # fmt: skip
                else:
                    response = await http.post("/evaluate", json={"task": "vector_add",
                                                                  "source": SOURCES[i % len(SOURCES)]})  # fmt: skip
                codes[response.status_code] += 1
            except httpx.HTTPError as e:
                codes[type(e).__name__] += 1
            latencies.append(time.perf_counter() - started)

    async with httpx.AsyncClient(base_url=url, timeout=600, limits=httpx.Limits(max_connections=clients)) as http:
        await asyncio.gather(*(client(http) for _ in range(clients)))
    return codes, latencies


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--devices", default="cpu:1")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "state"
        state.mkdir()
        proc, url = serve_process(state, "--devices", args.devices)
        try:
            wait_healthy(url, proc=proc)
            before = tree_rss(proc.pid)
            started = time.perf_counter()
            codes, latencies = asyncio.run(load(url, args.requests, args.clients))
            wall = time.perf_counter() - started
            after = tree_rss(proc.pid)
            metrics = httpx.get(f"{url}/metrics").text
        finally:
            kill_process(proc)
    latencies.sort()
    answered = sum(v for k, v in codes.items() if isinstance(k, int))
    print(f"{args.requests} requests from {args.clients} clients in {wall:.1f} s ({args.requests / wall:.0f}/s); "
          f"answered {answered}: {dict(sorted(codes.items(), key=str))}")  # fmt: skip
    p50, p99 = latencies[len(latencies) // 2], latencies[int(len(latencies) * 0.99)]
    print(f"latency p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, max {latencies[-1] * 1000:.0f} ms")
    mib = [x / 2**20 for x in (*before, *after)]
    print(f"service RSS {mib[0]:.0f} -> {mib[2]:.0f} MiB (+{mib[2] - mib[0]:.1f}); "
          f"with its workers {mib[1]:.0f} -> {mib[3]:.0f} MiB")
    print("\n".join(line for line in metrics.splitlines() if line.startswith(("kerneldojo_jobs_total",
                                                                             "kerneldojo_evaluations_total"))))
    return 0 if answered == args.requests and not any(isinstance(k, int) and k >= 500 for k in codes) else 1


if __name__ == "__main__":
    sys.exit(main())
