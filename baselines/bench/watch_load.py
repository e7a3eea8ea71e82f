"""Beside a benchmark: how busy the host's cores and the GPU are, sampled every `--every` seconds until stopped
(SIGTERM/SIGINT), then a summary line. Tells a pipeline short of CPU from one short of GPU time.

    python baselines/bench/watch_load.py OUT.jsonl [--every 2] & watcher=$!; ...; kill $watcher

Each line: seconds since start, the share of all cores busy (from /proc/stat), the 1-minute load, the GPU's
utilization (NVML's share of the interval a kernel ran), and how many processes run Python.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import time


def cpu_times() -> tuple[int, int]:
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def python_processes() -> int:
    count = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as f:
                count += f.read().startswith("python")
        except OSError:
            pass
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--every", type=float, default=2.0)
    args = parser.parse_args()
    try:
        import pynvml

        pynvml.nvmlInit()
        gpu = pynvml.nvmlDeviceGetHandleByIndex(0)
    except Exception:  # no NVML here: the host's figures only
        gpu = None
    stopping = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.append(True))
    rows, started, (busy0, total0) = [], time.time(), cpu_times()
    with open(args.out, "w") as out:
        while not stopping:
            time.sleep(args.every)
            busy, total = cpu_times()
            row = {"t": round(time.time() - started, 1), "cpu_busy": round((busy - busy0) / max(1, total - total0), 3),
                   "load1": os.getloadavg()[0], "pythons": python_processes(),
                   "gpu_util": pynvml.nvmlDeviceGetUtilizationRates(gpu).gpu / 100 if gpu is not None else None}
            busy0, total0 = busy, total
            rows.append(row)
            out.write(json.dumps(row) + "\n")
            out.flush()
        if rows:
            keys = ("cpu_busy", "load1", "pythons") + (("gpu_util",) if gpu is not None else ())
            summary = {key: round(statistics.median(r[key] for r in rows), 3) for key in keys}
            out.write(json.dumps({"median": summary, "samples": len(rows)}) + "\n")
            print(f"watch_load medians over {len(rows)} samples: {summary}", file=sys.stderr)


if __name__ == "__main__":
    main()
