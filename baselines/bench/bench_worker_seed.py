"""A GPU worker's start, to its first answered request, with and without the judge's compiled harness kernels seeded
into its Triton cache (`sandbox.harness_cache`); the two alternate, one worker at a time.

    python baselines/bench/bench_worker_seed.py [--device cuda] [--workers 4]

Prints each start and the medians (seconds).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    from kerneldojo.sandbox import harness_cache, process
    from kerneldojo.sandbox.device import resolve_device
    from kerneldojo.sandbox.protocol import SubmissionError

    device = resolve_device(args.device)
    started = time.perf_counter()
    seed = harness_cache.harness_triton_cache(str(device.torch_device))
    print(f"seed: {len(seed)} files, {sum(map(len, seed.values()))} bytes, made in "
          f"{time.perf_counter() - started:.2f} s", flush=True)
    times: dict[str, list[float]] = {"seeded": [], "unseeded": []}
    for i in range(2 * args.workers):
        kind = ("seeded", "unseeded")[i % 2]
        process.harness_triton_cache = (lambda spec: seed) if kind == "seeded" else (lambda spec: {})
        started = time.perf_counter()
        worker = process._Worker(device)
        with contextlib.suppress(SubmissionError):  # nothing loaded: an error reply, once the warm-up is done
            worker.call("flags", (), 300)
        times[kind].append(time.perf_counter() - started)
        worker.stop()
        print(f"{kind}: {times[kind][-1]:.2f} s", flush=True)
    print("medians: " + ", ".join(f"{k} {statistics.median(v):.2f} s" for k, v in times.items()))


if __name__ == "__main__":
    main()
