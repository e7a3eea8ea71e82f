"""What Nsight Compute costs the profiled process on the host, per kernel launch: the figure a bound on the
evidence replay's host work (red team round 32, docs/threat-model.md) has to allow for an honest kernel.

    python baselines/bench/probe_ncu_host_cost.py [--launches 1,10,100] [--json]

One program, run bare and under ncu with the evidence pass's flags (`graders.ncu.ncu_command`): it JITs a tiny
Triton kernel, then launches it N times and reports the process's CPU time (user + system, all threads, from
getrusage) and wall time over the N launches, and, for scale, a host numpy add of vector_add's largest bench case.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROGRAM = r"""
import json, resource, sys, time
import numpy as np, torch, triton, triton.language as tl

@triton.jit
def bump(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr) + 1)

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

x = torch.zeros(1, device="cuda")
bump[(1,)](x)
torch.cuda.synchronize()
rows = []
for n in [int(v) for v in sys.argv[1].split(",")]:
    c0, w0 = cpu(), time.perf_counter()
    for _ in range(n):
        bump[(1,)](x)
    torch.cuda.synchronize()
    rows.append({"launches": n, "cpu_ms_per_launch": (cpu() - c0) * 1e3 / n,
                 "wall_ms_per_launch": (time.perf_counter() - w0) * 1e3 / n})
a, b = np.random.rand(1 << 27).astype(np.float32), np.random.rand(1 << 27).astype(np.float32)
c0 = cpu()
np.add(a, b)
rows.append({"numpy_add_134M_cpu_ms": (cpu() - c0) * 1e3})
print("PROBE " + json.dumps(rows))
"""


def run(command: list[str]) -> list[dict]:
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    line = next((line for line in done.stdout.splitlines() if line.startswith("PROBE ")), None)
    if line is None:
        raise SystemExit(f"no result from {command[0]}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return json.loads(line.removeprefix("PROBE "))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--launches", default="1,10,100")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from kerneldojo.graders.ncu import find_ncu, ncu_command

    program = Path(tempfile.mkdtemp(prefix="ncu-probe-")) / "probe.py"  # Triton reads a kernel's source from a file
    program.write_text(PROGRAM)
    target = [sys.executable, str(program), args.launches]
    ncu = find_ncu()
    found = {"bare": run(target)}
    if ncu:
        started = time.perf_counter()
        found["ncu"] = run(ncu_command(ncu, target, launch_count=None, metrics=("gpu__time_duration.sum",)))
        found["ncu_wall_s"] = time.perf_counter() - started
    print(json.dumps(found, indent=None if args.json else 1))


if __name__ == "__main__":
    main()
