"""Does CUDA IPC (how the judge sends a GPU worker its inputs) work when the receiver is in a pid namespace of its
own, and with a private /dev/shm that holds only torch's ref-counter file? Prints a table; needs a GPU and root
(or unprivileged user namespaces).

    python baselines/bench/probe_cuda_ipc_pidns.py [--json]

The sender shares a CUDA tensor with `torch.multiprocessing.reductions.reduce_tensor` (what `sandbox.protocol`
does for a GPU worker); each receiver is a fresh process that enters the namespaces of its row, rebuilds the
tensor from the handle and sums it. torch opens the handle's ref counter by name in /dev/shm (`/torch_<pid>_...`),
so the "private /dev/shm" rows mount an empty tmpfs there and bind that one file back in (or not). A row that
works means a GPU worker can have that confinement: `KERNELDOJO_GPU_PIDNS=1` turns the pid namespace on in GPU
mode (docs/sandbox.md).
"""

from __future__ import annotations

import ctypes
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
ROWS = [  # (name, pid namespace, /dev/shm: "host" | "private+file" | "private")
    ("baseline: the judge's namespaces", False, "host"),
    ("own pid namespace", True, "host"),
    ("private /dev/shm + the ref-counter file", False, "private+file"),
    ("own pid namespace + private /dev/shm + the file", True, "private+file"),
    ("own pid namespace + empty private /dev/shm", True, "private"),
]


def receive(handle_path: str, pidns: bool, shm: str) -> None:
    """The receiver: enter the row's namespaces, then rebuild the tensor and print its sum as JSON."""
    libc = ctypes.CDLL(None, use_errno=True)
    with open(handle_path, "rb") as f:
        rebuild, args, ref_name = pickle.load(f)
    flags = CLONE_NEWNS | (CLONE_NEWPID if pidns else 0)
    if os.geteuid() != 0:
        uid, gid = os.geteuid(), os.getegid()
        flags |= CLONE_NEWUSER
    if libc.unshare(flags) != 0:
        print(json.dumps({"error": f"unshare: {os.strerror(ctypes.get_errno())}"}))
        return
    if flags & CLONE_NEWUSER:
        for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
            Path(f"/proc/self/{name}").write_text(text)
    if pidns:  # the next child is pid 1 of the new namespace
        child = os.fork()
        if child:
            _, status = os.waitpid(child, 0)
            os._exit(os.waitstatus_to_exitcode(status))
    try:
        libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None)
        if shm != "host":
            keep = os.open(f"/dev/shm{ref_name}", os.O_PATH) if shm == "private+file" else None
            if libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", 0, b"size=1m") != 0:
                raise OSError(ctypes.get_errno(), "mount /dev/shm")
            if keep is not None:
                Path(f"/dev/shm{ref_name}").touch()
                if libc.mount(f"/proc/self/fd/{keep}".encode(), f"/dev/shm{ref_name}".encode(), None, MS_BIND, None):
                    raise OSError(ctypes.get_errno(), "bind the ref-counter file")
        import torch

        started = time.perf_counter()
        tensor = rebuild(*args)
        total = float(tensor.sum().item())
        print(json.dumps({"sum": total, "pid": os.getpid(), "shm": sorted(os.listdir("/dev/shm"))[:5],
                          "open_ms": (time.perf_counter() - started) * 1e3, "torch": torch.__version__}))
    except Exception as e:  # the measurement: what failed, as it failed
        print(json.dumps({"error": f"{type(e).__name__}: {e}"[:300]}))
    sys.stdout.flush()
    os._exit(0)


def probe() -> list[dict]:
    import torch
    from torch.multiprocessing.reductions import reduce_tensor

    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA GPU")
    tensor = torch.arange(1024, device="cuda", dtype=torch.float32)
    rebuild, args = reduce_tensor(tensor)
    ref_name = args[11].decode() if isinstance(args[11], bytes) else str(args[11])  # ref_counter_handle
    rows = []
    with tempfile.NamedTemporaryFile(suffix=".pkl") as f:
        pickle.dump((rebuild, args, ref_name), f)
        f.flush()
        for name, pidns, shm in ROWS:
            done = subprocess.run([sys.executable, __file__, "--receive", f.name, str(int(pidns)), shm],
                                  capture_output=True, text=True, timeout=120)
            try:
                got = json.loads(done.stdout.strip().splitlines()[-1])
            except (IndexError, ValueError):
                got = {"error": f"exit {done.returncode}: {done.stderr.strip()[-300:]}"}
            ok = got.get("sum") == float(tensor.sum().item())
            rows.append({"row": name, "pid_namespace": pidns, "dev_shm": shm, "works": ok, **got})
    return rows


def main() -> None:
    if sys.argv[1:2] == ["--receive"]:
        return receive(sys.argv[2], sys.argv[3] == "1", sys.argv[4])
    rows = probe()
    if "--json" in sys.argv:
        print(json.dumps(rows))
        return
    print(f"{'configuration':52s} {'works':6s} detail")
    for row in rows:
        detail = f"pid {row['pid']}, open {row['open_ms']:.1f} ms" if row["works"] else row.get("error", row)
        print(f"{row['row']:52s} {'yes' if row['works'] else 'NO':6s} {detail}")


if __name__ == "__main__":
    main()
