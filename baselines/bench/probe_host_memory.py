"""Which Nsight Compute metrics see a kernel reading or writing host memory (the zero-copy Open item of
docs/threat-model.md): the figures a `host_memory` rule in the evidence pass would stand on.

    python baselines/bench/probe_host_memory.py OUT_DIR

Lists the device's metrics (`ncu --query-metrics`, written whole to OUT_DIR/ncu-metrics.txt), keeps those of the
system-memory and peer apertures and the PCIe link it lists, then runs one program under ncu with them: a Triton
copy kernel on device memory (the honest baseline), on a pinned host tensor read and written directly (zero-copy),
on managed memory (cudaMallocManaged, written on the host first), and on pageable host memory (works only where
the driver has HMM). Prints each kernel's figures, and each case's time without ncu. Launches come in the
program's order, six per case (one warm-up, five timed).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

PROGRAM = r"""
import ctypes, json, sys, time
import torch, triton, triton.language as tl

@triton.jit
def copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n) + 1.0, mask=offs < n)

class Pointer:  # what Triton's launcher takes for a pointer: data_ptr() and a dtype
    def __init__(self, address, dtype):
        self.address, self.dtype = address, dtype
    def data_ptr(self):
        return self.address

N = 1 << 24
def launch(name, src, dst):
    try:
        copy[(triton.cdiv(N, 1024),)](src, dst, N, BLOCK=1024)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(5):
            copy[(triton.cdiv(N, 1024),)](src, dst, N, BLOCK=1024)
        torch.cuda.synchronize()
        print("CASE " + json.dumps({"case": name, "ms": (time.perf_counter() - t0) * 200}), flush=True)
    except Exception as e:
        print("CASE " + json.dumps({"case": name, "error": f"{type(e).__name__}: {e}"[:300]}), flush=True)

device = torch.empty(N, device="cuda"), torch.empty(N, device="cuda")
launch("device_to_device", *device)
pinned = torch.ones(N, pin_memory=True)
launch("pinned_read", pinned, device[1])
launch("pinned_write", device[0], pinned)
cuda = ctypes.CDLL("libcuda.so.1")
managed = ctypes.c_uint64()
rc = cuda.cuMemAllocManaged(ctypes.byref(managed), N * 4, 1)
if rc == 0:
    ctypes.memset(managed.value, 0, N * 4)  # touched on the host: the pages start there
    launch("managed_read", Pointer(managed.value, torch.float32), device[1])
    launch("managed_write", device[0], Pointer(managed.value, torch.float32))
else:
    print("CASE " + json.dumps({"case": "managed", "error": f"cuMemAllocManaged {rc}"}), flush=True)
pageable = torch.ones(N)
launch("pageable_read", pageable, device[1])
"""


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    from kerneldojo.graders.ncu import find_ncu

    ncu = find_ncu()
    listing = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, timeout=120).stdout
    (out / "ncu-metrics.txt").write_text(listing)
    # The counters that could see a kernel's host-memory traffic (names as ncu lists them on GH100, 2026-11-28):
    # L2 sectors in the system-memory and peer apertures (all units, the SMs' alone) and the PCIe link's bytes.
    wanted = ["gpu__time_duration.sum", "lts__t_sectors_aperture_sysmem.sum", "lts__t_sectors_aperture_peer.sum",
              "lts__t_sectors_srcunit_tex_aperture_sysmem.sum", "pcie__read_bytes.sum", "pcie__write_bytes.sum"]
    known = set(re.findall(r"^(\S+)", listing, re.M))
    wanted = [m for m in wanted if m.removesuffix(".sum") in known]
    program = Path(tempfile.mkdtemp(prefix="host-memory-probe-")) / "probe.py"
    program.write_text(PROGRAM)
    bare = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=300)
    cases = [json.loads(line[5:]) for line in bare.stdout.splitlines() if line.startswith("CASE ")]
    print("bare:", json.dumps(cases, indent=1), bare.stderr[-1500:])

    def profile(metrics: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run([ncu, "--csv", "--page", "raw", "--print-units", "base", "--clock-control", "none",
                               "--cache-control", "all", "--kernel-name", "regex:copy", "--launch-count", "40",
                               "--metrics", ",".join(metrics), sys.executable, str(program)],
                              capture_output=True, text=True, timeout=400)

    done = profile(wanted)
    (out / "ncu-host-memory.csv").write_text(done.stdout + "\n" + done.stderr[-4000:])
    from kerneldojo.graders.ncu import parse_ncu_csv

    print("header:", next((line for line in done.stdout.splitlines() if '"Kernel Name"' in line), None))
    for launch in parse_ncu_csv(done.stdout):
        print(json.dumps({k: v for k, v in launch.items() if k != "Kernel Name"}))


if __name__ == "__main__":
    main()
